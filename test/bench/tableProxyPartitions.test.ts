import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { TableClient, odata } from '@azure/data-tables';
import { devAccountKey, devAccountName, startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import { startTableProxy, type TableProxy } from '../../bench/tableProxy.js';
import { diffCounts } from '../../bench/stats.js';

/**
 * The table proxy's per-partition counters against Azurite, through the SDK the app uses: what
 * the capacity bench divides into the 2,000 entities/s target must be what the server did.
 */
let azurite: AzuriteInstance;
let proxy: TableProxy;
let table: TableClient;

before(async () => {
  azurite = await startAzurite({ services: ['table'] });
  proxy = await startTableProxy();
  proxy.setUpstream(azurite.tableUrl.replace(/\/devstoreaccount1\/?$/, ''));
  table = TableClient.fromConnectionString(
    `DefaultEndpointsProtocol=http;AccountName=${devAccountName};AccountKey=${devAccountKey};` +
      `TableEndpoint=http://127.0.0.1:${proxy.port}/${devAccountName};`,
    'Capacity',
    { allowInsecureConnection: true },
  );
  await table.createTable();
});

after(async () => {
  await proxy?.close();
  await azurite?.stop();
});

const part = (p: string, what: string) => `part.Capacity/${p}.${what}`;

test('a batch counts one request and its entities written against its partition', async () => {
  const before = proxy.snapshot();
  await table.submitTransaction([
    ['create', { partitionKey: 'state:Pending', rowKey: 't:1:o1' }],
    ['create', { partitionKey: 'state:Pending', rowKey: 'c:x:1:o1' }],
    ['upsert', { partitionKey: 'state:Pending', rowKey: 'n:03', Count: 1 }],
  ]);
  await table.createEntity({ partitionKey: 'ab', rowKey: 'o1' });
  await table.deleteEntity('ab', 'o1');
  const d = diffCounts(proxy.snapshot(), before);
  assert.equal(d[part('state:Pending', 'requests')], 1);
  assert.equal(d[part('state:Pending', 'written')], 3);
  assert.equal(d[part('ab', 'requests')], 2);
  assert.equal(d[part('ab', 'written')], 2);
  assert.equal(d['part.unparsed'], undefined);
});

test('reads and queries count the entities they return against their partitions', async () => {
  await table.submitTransaction([
    ['upsert', { partitionKey: 'state:Processing', rowKey: 'a' }],
    ['upsert', { partitionKey: 'state:Processing', rowKey: 'b' }],
  ]);
  const before = proxy.snapshot();
  await table.getEntity('state:Processing', 'a');
  await table.getEntity('state:Processing', 'zz').catch(() => undefined); // 404: a request, no entity
  const pinned = table.listEntities({
    queryOptions: { filter: odata`PartitionKey eq ${'state:Processing'}`, select: ['RowKey'] },
  });
  for await (const _ of pinned) void _;
  // A scan names no partition: its entities count against the partitions they came from.
  const scan = table.listEntities({ queryOptions: { filter: odata`RowKey ge ${'a'}` } });
  for await (const _ of scan) void _;
  const d = diffCounts(proxy.snapshot(), before);
  assert.equal(d[part('state:Processing', 'requests')], 3);
  assert.equal(d[part('state:Processing', 'read')], 1 + 2 + 2);
  assert.equal(d[part('(scan)', 'requests')], 1);
  assert.ok((d[part('state:Pending', 'read')] ?? 0) >= 3, JSON.stringify(d));
});
