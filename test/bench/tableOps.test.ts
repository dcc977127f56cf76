import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TableClient, odata } from '@azure/data-tables';
import { startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import { startTableProxy, type TableProxy } from '../../bench/tableProxy.js';
import { TableThrottle } from '../../bench/tableThrottle.js';
import { diffCounts } from '../../bench/stats.js';
import { operationBreakdown, operationOf, outcomeOf } from '../../bench/tableOps.js';

/**
 * The table proxy's per-operation counters, through the SDK the app uses against Azurite: what a
 * partition's load per order breaks down into must be what the server (or the throttle) did.
 */
describe('table operations, classified', () => {
  it('names single operations by method, key and If-Match', () => {
    assert.equal(operationOf('GET', true, false), 'get');
    assert.equal(operationOf('GET', false, false), 'query');
    assert.equal(operationOf('POST', false, false), 'insert');
    assert.equal(operationOf('PUT', true, false), 'upsert');
    assert.equal(operationOf('PUT', true, true), 'update');
    assert.equal(operationOf('MERGE', true, true), 'merge');
    assert.equal(operationOf('PATCH', true, false), 'upsertMerge');
    assert.equal(operationOf('DELETE', true, true), 'delete');
  });

  it('reads a failed sub-request out of a batch answer', () => {
    assert.equal(outcomeOf(202, '--b\r\nHTTP/1.1 204 No Content\r\n'), 'ok');
    assert.equal(outcomeOf(202, '--b\r\nHTTP/1.1 412 Precondition Failed\r\n'), '412');
    assert.equal(outcomeOf(404), '404');
    assert.equal(outcomeOf(200), 'ok');
  });
});

describe('the table proxy counting per operation (Azurite behind it)', () => {
  let azurite: AzuriteInstance;
  let proxy: TableProxy;
  let client: TableClient;
  let t = 0;

  before(async () => {
    azurite = await startAzurite({ services: ['table'] });
    // 6 entities/s per partition, the clock moved by the test only.
    const throttle = new TableThrottle(
      { partitionEntitiesPerSecond: 6, accountRequestsPerSecond: 1_000 },
      () => t,
    );
    proxy = await startTableProxy({ throttle });
    proxy.setUpstream(new URL(azurite.tableUrl).origin);
    const cs = azurite.connectionString.replace(
      /TableEndpoint=[^;]+/,
      `TableEndpoint=http://127.0.0.1:${proxy.port}/devstoreaccount1`,
    );
    client = TableClient.fromConnectionString(cs, 'OrderIndex', {
      allowInsecureConnection: true,
      retryOptions: { maxRetries: 0 },
    });
    await client.createTable();
  });
  after(async () => {
    await proxy?.close();
    await azurite?.stop();
  });

  const pending = (table: string, group: string) =>
    table === 'OrderIndex' && group.startsWith('state:Pending');

  it('splits a partition family’s load into batches, reads, queries and their outcomes', async () => {
    const from = proxy.snapshot();
    // An index group and its counter, as StateIndex.move writes them (spread partition 1).
    const pk = 'state:Pending:1';
    const created = await client.submitTransaction([
      ['create', { partitionKey: pk, rowKey: 'a:1:o1' }],
      ['upsert', { partitionKey: pk, rowKey: 't:1:o1' }, 'Replace'],
      ['create', { partitionKey: pk, rowKey: 'n:00', Count: 1 }],
    ]);
    const etag = created.subResponses[2].etag!;
    // A stale counter ETag: the batch fails 412 and writes nothing, yet was sent (3 entities).
    t += 1_000;
    await client.updateEntity({ partitionKey: pk, rowKey: 'n:00', Count: 2 }, 'Replace', { etag });
    await assert.rejects(
      client.submitTransaction([
        ['delete', { partitionKey: pk, rowKey: 'a:1:o1' }],
        ['delete', { partitionKey: pk, rowKey: 't:1:o1' }],
        ['update', { partitionKey: pk, rowKey: 'n:00', Count: 0 }, 'Replace', { etag }],
      ]),
    );
    t += 1_000;
    await client.getEntity(pk, 'n:00');
    await assert.rejects(client.getEntity(pk, 'a:9:gone'));
    for await (const _ of client.listEntities({ queryOptions: { filter: odata`PartitionKey eq ${pk}` } }))
      void _;
    // Three more entities spend the partition's 6 entities/s: the next write is refused by the throttle.
    await client.submitTransaction(
      ['y0', 'y1', 'y2'].map((rowKey) => ['upsert', { partitionKey: pk, rowKey }, 'Replace'] as const),
    );
    await assert.rejects(client.upsertEntity({ partitionKey: pk, rowKey: 'x' }));
    const d = diffCounts(proxy.snapshot(), from);
    const rows = operationBreakdown(from, proxy.snapshot(), 1, pending);
    const row = (operation: string, outcome: string) =>
      rows.find((r) => r.operation === operation && r.outcome === outcome);
    assert.deepEqual(
      { ...row('batch(insert2+upsert1)', 'ok'), table: undefined },
      {
        table: undefined,
        group: 'state:Pending:{p}',
        operation: 'batch(insert2+upsert1)',
        outcome: 'ok',
        requestsPerOrder: 1,
        entitiesPerOrder: 3,
      },
      JSON.stringify(d),
    );
    assert.equal(row('update', 'ok')?.entitiesPerOrder, 1);
    assert.equal(row('batch(delete2+update1)', '412')?.entitiesPerOrder, 3, JSON.stringify(rows));
    assert.equal(row('get', 'ok')?.requestsPerOrder, 1);
    // A read that finds nothing still costs the partition its request.
    assert.equal(row('get', '404')?.entitiesPerOrder, 1);
    // The query returned the three rows the 412 batch left in place.
    assert.equal(row('query', 'ok')?.entitiesPerOrder, 3);
    assert.equal(row('batch(upsert3)', 'ok')?.entitiesPerOrder, 3);
    // upsertEntity merges by default (PATCH without If-Match); refused, it wrote nothing.
    assert.equal(row('upsertMerge', 'refused503')?.requestsPerOrder, 1);
  });
});
