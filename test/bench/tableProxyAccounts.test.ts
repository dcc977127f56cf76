import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RestError, TableClient } from '@azure/data-tables';
import { devAccountName, startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import { startTableProxy, type TableProxy } from '../../bench/tableProxy.js';
import { TableThrottle } from '../../bench/tableThrottle.js';

/**
 * Orders spread over storage accounts (StateStoreAccounts) in the throttled simulation: each
 * account has its own requests per second and its own partitions, as in Azure. One Azurite serves
 * two accounts path-style; the proxy must tell them apart by the path's first segment.
 */
describe('the table proxy keys its limits by storage account (Azurite with two accounts behind it)', () => {
  let azurite: AzuriteInstance;
  let proxy: TableProxy;
  let throttle: TableThrottle;
  // The proxy's clock: nothing refills unless the test moves it.
  const t = 0;
  const client = (account: string) =>
    TableClient.fromConnectionString(
      azurite
        .tableConnectionString(account)
        .replace(/TableEndpoint=[^;]+/, `TableEndpoint=http://127.0.0.1:${proxy.port}/${account}`),
      'Accounts',
      { allowInsecureConnection: true, retryOptions: { maxRetries: 0 } },
    );

  before(async () => {
    azurite = await startAzurite({ services: ['table'], extraAccounts: ['orders2'] });
    throttle = new TableThrottle({ partitionEntitiesPerSecond: 2, accountRequestsPerSecond: 3 }, () => t);
    proxy = await startTableProxy({ throttle });
    proxy.setUpstream(new URL(azurite.tableUrl).origin);
    // Table creation is not throttled (the proxy lets admin requests through).
    await client(devAccountName).createTable();
    await client('orders2').createTable();
  });
  after(async () => {
    await proxy?.close();
    await azurite?.stop();
  });

  it('one account past its requests per second leaves the other account its own', async () => {
    const first = client(devAccountName);
    const second = client('orders2');
    for (let i = 0; i < 3; i++) await first.upsertEntity({ partitionKey: `a${i}`, rowKey: 'r' });
    await assert.rejects(first.upsertEntity({ partitionKey: 'a9', rowKey: 'r' }), (e: unknown) => {
      assert.ok(e instanceof RestError, String(e));
      assert.equal(e.statusCode, 503);
      assert.match(e.message, /over the account limit/);
      return true;
    });
    // The same second: the other account still serves its three requests, then refuses too.
    for (let i = 0; i < 3; i++) await second.upsertEntity({ partitionKey: `b${i}`, rowKey: 'r' });
    await assert.rejects(second.upsertEntity({ partitionKey: 'b9', rowKey: 'r' }), /over the account limit/);
    assert.equal(throttle.refused.account, 2);
    assert.deepEqual(throttle.refusedBy.account, { [devAccountName]: 1, orders2: 1 });
    const counts = proxy.snapshot();
    assert.equal(counts[`account.${devAccountName}.transactions`], 3);
    assert.equal(counts['account.orders2.transactions'], 3);
  });

  it('the same partition key in two accounts is two partitions', async () => {
    const p = await startTableProxy({
      throttle: new TableThrottle(
        { partitionEntitiesPerSecond: 2, accountRequestsPerSecond: 1_000 },
        () => t,
      ),
    });
    p.setUpstream(new URL(azurite.tableUrl).origin);
    const via = (account: string) =>
      TableClient.fromConnectionString(
        azurite
          .tableConnectionString(account)
          .replace(/TableEndpoint=[^;]+/, `TableEndpoint=http://127.0.0.1:${p.port}/${account}`),
        'Accounts',
        { allowInsecureConnection: true, retryOptions: { maxRetries: 0 } },
      );
    try {
      // A batch of 2 spends the partition's second in the first account...
      await via(devAccountName).submitTransaction([
        ['upsert', { partitionKey: 'state:Pending:0', rowKey: 'x1' }],
        ['upsert', { partitionKey: 'state:Pending:0', rowKey: 'x2' }],
      ]);
      await assert.rejects(
        via(devAccountName).upsertEntity({ partitionKey: 'state:Pending:0', rowKey: 'x3' }),
        (e: unknown) => e instanceof RestError && (e.statusCode === 503 || e.statusCode === 500),
      );
      // ...and not in the second, whose partition of the same name is its own.
      await via('orders2').submitTransaction([
        ['upsert', { partitionKey: 'state:Pending:0', rowKey: 'x1' }],
        ['upsert', { partitionKey: 'state:Pending:0', rowKey: 'x2' }],
      ]);
    } finally {
      await p.close();
    }
  });
});
