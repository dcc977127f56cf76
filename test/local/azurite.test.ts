import { Agent, request } from 'node:http';
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

test('Azurite keeps an idle connection past its own 5 s default, so a client that comes back does not queue for a new one', async () => {
  // Under load a Node 24 server accepts one new connection per turn of its event loop (strace of
  // the staged bench: one accept every 150-350 ms, 35-87 queued); a lease renewal every 5 s on a
  // connection Azurite had closed waited 6-20 s to be accepted.
  const a = await startAzurite();
  const agent = new Agent({ keepAlive: true });
  const get = () =>
    new Promise<boolean>((resolve, reject) => {
      const req = request(`${a.tableUrl}/Tables`, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(req.reusedSocket));
      });
      req.on('error', reject);
      req.end();
    });
  try {
    assert.equal(await get(), false, 'the first request opens the connection');
    await new Promise((r) => setTimeout(r, 6_000));
    assert.equal(await get(), true, 'after 6 s idle the same connection answers');
  } finally {
    agent.destroy();
    await a.stop();
  }
});

test('Azurite prints no line per request, and what it prints after start-up is not kept past 16 KiB', async () => {
  // Its access log was one line per request, and the parent appended every line to one string it
  // searched again on each chunk: in a 2-minute bench that search took 60 s of the bench
  // process's CPU (a --cpu-prof of bench/callLimits.js, 117 s sampled), on a two-core machine.
  const a = await startAzurite();
  try {
    const client = TableClient.fromConnectionString(a.connectionString, 'Quiet', {
      allowInsecureConnection: true,
    });
    await client.createTable();
    for (let i = 0; i < 200; i++) {
      await client.upsertEntity({ partitionKey: 'p', rowKey: String(i), v: i });
      await client.getEntity('p', 'missing').catch(() => undefined);
    }
    const kept = a.recentOutput();
    assert.doesNotMatch(
      kept,
      /"(GET|PUT|POST|PATCH|DELETE|MERGE) \//,
      'an access-log line reached the parent',
    );
    assert.ok(kept.length <= 16 * 1024, `kept ${kept.length} characters`);
  } finally {
    await a.stop();
  }
});
