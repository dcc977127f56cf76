import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TableClient } from '@azure/data-tables';
import { startAzurite } from '../../local/azurite.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('Azurite starts from node_modules on free ports, answers, and stops without leaving a process', async () => {
  const a = await startAzurite({ services: ['blob', 'queue', 'table'] });
  const b = await startAzurite();
  try {
    assert.notEqual(a.tableUrl, b.tableUrl);
    assert.match(a.connectionString, /BlobEndpoint=http:\/\/127\.0\.0\.1:\d+\/devstoreaccount1;/);
    assert.match(a.connectionString, /QueueEndpoint=/);
    const client = TableClient.fromConnectionString(a.connectionString, 'Probe', {
      allowInsecureConnection: true,
    });
    await client.createTable();
    await client.createEntity({ partitionKey: 'p', rowKey: 'r', v: 1 });
    assert.equal((await client.getEntity('p', 'r')).v, 1);
  } finally {
    await a.stop();
    await b.stop();
  }
  assert.equal(alive(a.pid), false);
  assert.equal(alive(b.pid), false);
  await a.stop(); // idempotent
});
