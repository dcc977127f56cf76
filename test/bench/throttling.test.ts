import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RestError, TableClient } from '@azure/data-tables';
import { isServiceBusError, ServiceBusClient } from '@azure/service-bus';
import { startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../../emulators/servicebus/index.js';
import { RateLimiter } from '../../bench/rateLimit.js';
import { NamespaceCredits } from '../../bench/serviceBusCredits.js';
import { startTableProxy, type TableProxy } from '../../bench/tableProxy.js';
import { TableThrottle } from '../../bench/tableThrottle.js';
import { clockLoadAtRest, compare, enforcedCeilings, scaledLimits } from '../../bench/simulationModel.js';
import { parseLimitTable } from '../../bench/limits.js';
import type { Deployment, OrderLoad } from '../../bench/capacityModel.js';

const root = resolve(__dirname, '..', '..', '..');
/** The Table service's error code as the SDK surfaces it: the body's odata.error and the header. */
const tableCode = (e: RestError): string | undefined => {
  // The SDK maps the x-ms-error-code header to details.errorCode.
  const d = e.details as { odataError?: { code?: string }; errorCode?: string } | undefined;
  assert.equal(d?.odataError?.code, d?.errorCode, 'body and header agree');
  return d?.odataError?.code;
};

describe('RateLimiter', () => {
  it('lets a key spend its rate, refuses past it, and refills with time', () => {
    let t = 0;
    const l = new RateLimiter(10, () => t);
    let passed = 0;
    for (let i = 0; i < 15; i++) if (l.tryTake('p')) passed++;
    assert.equal(passed, 10, 'one second of burst');
    assert.equal(l.tryTake('other'), true, 'keys are independent');
    t += 500;
    passed = 0;
    for (let i = 0; i < 15; i++) if (l.tryTake('p')) passed++;
    assert.equal(passed, 5, 'half a second refills half the rate');
  });

  it('a large cost passes on a positive level and its debt holds the next ones back', () => {
    let t = 0;
    const l = new RateLimiter(4, () => t);
    assert.equal(l.tryTake('p', 1), true); // 3 left
    assert.equal(l.tryTake('p', 10), true); // -7: a batch bigger than the bucket still passes once
    assert.equal(l.open('p'), false);
    t += 1_500; // +6: still -1
    assert.equal(l.tryTake('p'), false);
    t += 500; // +2: 1
    assert.equal(l.tryTake('p'), true);
    l.debit('p', 5);
    assert.equal(l.open('p'), false, 'a debt learnt afterwards counts too');
  });
});

describe('the table proxy enforcing scaled limits (Azurite behind it)', () => {
  let azurite: AzuriteInstance;
  let proxy: TableProxy;
  let throttle: TableThrottle;
  let client: TableClient;
  // The proxy's clock: a refill happens only when the test moves it.
  let t = 0;

  before(async () => {
    azurite = await startAzurite({ services: ['table'] });
    throttle = new TableThrottle({ partitionEntitiesPerSecond: 5, accountRequestsPerSecond: 1_000 }, () => t);
    proxy = await startTableProxy({ throttle });
    proxy.setUpstream(new URL(azurite.tableUrl).origin);
    const cs = azurite.connectionString.replace(
      /TableEndpoint=[^;]+/,
      `TableEndpoint=http://127.0.0.1:${proxy.port}/devstoreaccount1`,
    );
    client = TableClient.fromConnectionString(cs, 'Throttled', {
      allowInsecureConnection: true,
      retryOptions: { maxRetries: 0 },
    });
    await client.createTable();
  });
  after(async () => {
    await proxy?.close();
    await azurite?.stop();
  });

  it('past a partition’s entities per second the SDK gets 503 ServerBusy or 500 OperationTimedOut; nothing is written', async () => {
    // A batch of 5 entities spends the partition's second.
    await client.submitTransaction(
      Array.from({ length: 5 }, (_, i) => ['create', { partitionKey: 'hot', rowKey: `r${i}` }] as const),
    );
    const refused: RestError[] = [];
    for (let i = 0; i < 4; i++) {
      try {
        await client.createEntity({ partitionKey: 'hot', rowKey: `late${i}` });
      } catch (e) {
        assert.ok(e instanceof RestError, String(e));
        refused.push(e);
      }
    }
    assert.equal(refused.length, 4, 'every write in the same second is refused');
    for (const e of refused) {
      assert.ok(
        (e.statusCode === 503 && tableCode(e) === 'ServerBusy') ||
          (e.statusCode === 500 && tableCode(e) === 'OperationTimedOut'),
        `${e.statusCode} ${tableCode(e)}`,
      );
    }
    assert.ok(
      refused.some((e) => tableCode(e) === 'OperationTimedOut'),
      'one in four answers as a timeout',
    );
    // Another partition is not throttled.
    await client.createEntity({ partitionKey: 'cold', rowKey: 'r' });
    const direct = TableClient.fromConnectionString(azurite.connectionString, 'Throttled', {
      allowInsecureConnection: true,
    });
    const rows: string[] = [];
    for await (const e of direct.listEntities({ queryOptions: { filter: "PartitionKey eq 'hot'" } }))
      rows.push(String(e.rowKey));
    assert.deepEqual(rows.sort(), ['r0', 'r1', 'r2', 'r3', 'r4'], 'a refused write never reached the server');
    // A second later the partition has refilled.
    t += 1_000;
    await client.createEntity({ partitionKey: 'hot', rowKey: 'after' });
    assert.equal(throttle.refused.partition, 4);
  });

  it('past the account’s requests per second every partition is refused with ServerBusy', async () => {
    const accountThrottle = new TableThrottle(
      { partitionEntitiesPerSecond: 1_000, accountRequestsPerSecond: 3 },
      () => t,
    );
    const p = await startTableProxy({ throttle: accountThrottle });
    p.setUpstream(new URL(azurite.tableUrl).origin);
    try {
      const cs = azurite.connectionString.replace(
        /TableEndpoint=[^;]+/,
        `TableEndpoint=http://127.0.0.1:${p.port}/devstoreaccount1`,
      );
      const c = TableClient.fromConnectionString(cs, 'Throttled', {
        allowInsecureConnection: true,
        retryOptions: { maxRetries: 0 },
      });
      for (let i = 0; i < 3; i++) await c.upsertEntity({ partitionKey: `a${i}`, rowKey: 'r' });
      await assert.rejects(c.upsertEntity({ partitionKey: 'a9', rowKey: 'r' }), (e: unknown) => {
        assert.ok(e instanceof RestError);
        assert.equal(e.statusCode, 503);
        assert.equal(tableCode(e), 'ServerBusy');
        assert.match(e.message, /over the account limit/);
        return true;
      });
      assert.equal(accountThrottle.refused.account, 1);
    } finally {
      await p.close();
    }
  });
});

describe('Service Bus credits per namespace (the emulator refuses with server-busy)', () => {
  let emulator: ServiceBusEmulator;
  let credits: NamespaceCredits;
  let t = 0;

  before(async () => {
    // order-status has one subscription with one rule: a send to it costs 2 credits.
    credits = new NamespaceCredits(
      6,
      { 'order-status': 1 },
      (p) => p.startsWith('ignored'),
      () => t,
    );
    emulator = await startServiceBusEmulator({
      config: join(root, 'infra', 'servicebus-emulator', 'Config.json'),
      port: 0,
      refuseSend: credits.refuseSend,
    });
    credits.attach(() => emulator.counters());
  });
  after(async () => {
    await emulator?.stop();
  });

  it('sends, filter evaluations and deliveries spend credits; past them a send fails as ServiceBusy', async () => {
    const client = new ServiceBusClient(emulator.connectionString, { retryOptions: { maxRetries: 0 } });
    try {
      const queue = client.createSender('scheduler');
      const topic = client.createSender('order-status');
      await queue.sendMessages({ body: 1 }); // 1
      await topic.sendMessages({ body: 2 }); // + 2 (send and one filter evaluation)
      const receiver = client.createReceiver('scheduler', { receiveMode: 'receiveAndDelete' });
      const got = await receiver.receiveMessages(1, { maxWaitTimeInMs: 2_000 });
      assert.equal(got.length, 1); // + 1 delivery
      await queue.sendMessages({ body: 3 }); // + 1: level 6 - 5 = 1, still open
      await assert.rejects(
        (async () => {
          await queue.sendMessages({ body: 4 }); // + 1 (this one passes: level 1 > 0)
          await queue.sendMessages({ body: 5 }); // level 0: refused
        })(),
        (e: unknown) => {
          assert.ok(isServiceBusError(e), String(e));
          assert.equal(e.code, 'ServiceBusy');
          return true;
        },
      );
      assert.equal(credits.paid, 6);
      assert.equal(credits.refused, 1);
      t += 1_000; // the namespace's next second
      await queue.sendMessages({ body: 6 });
      await receiver.close();
    } finally {
      await client.close();
    }
  });
});

describe('the capacity model at limits / k', () => {
  const limits = parseLimitTable(JSON.parse(readFileSync(join(root, 'bench', 'limits.json'), 'utf8')));
  const load: OrderLoad = {
    kind: 'success',
    sharedPartitions: [
      { table: 'OrderIndex', partition: 'state:Pending:1', requests: 1, read: 0, written: 5 },
      { table: 'OrderIndex', partition: 'state:Pending:7', requests: 1, read: 0, written: 5 },
    ],
    tableRequests: 16,
    entities: [{ entity: 'scheduler', sent: 9, received: 7, settled: 7, filterEvaluations: 2 }],
    bytesIn: 9000,
    bytesOut: 6000,
    executions: { scheduler: 4 },
    executionMs: { scheduler: 5 },
  };
  const d: Deployment = {
    serviceBusTier: 'Standard',
    messagingUnits: 0,
    serviceBusNamespaces: 1,
    storageAccounts: 1,
    indexPartitionsPerState: 1,
    maxInstances: 100,
    perInstanceConcurrency: 16,
    instanceMemoryMB: 512,
  };

  it('divides rates by k and leaves counts alone', () => {
    const s = scaledLimits(limits, 10);
    assert.equal(
      s.value('tablePartitionEntitiesPerSecond'),
      limits.value('tablePartitionEntitiesPerSecond') / 10,
    );
    assert.equal(s.value('serviceBusStandardCreditsPerSecond'), 100);
    assert.equal(s.value('flexMaximumInstanceCountDefault'), limits.value('flexMaximumInstanceCountDefault'));
  });

  it('keeps only what a run enforces; partitions and credits scale as the model says', () => {
    const s = scaledLimits(limits, 10);
    const both = enforcedCeilings(
      load,
      d,
      s,
      { spreadTables: ['OrderIndex'] },
      { tables: true, serviceBusCredits: true },
    );
    const resources = both.map((c) => c.source);
    assert.ok(!resources.includes('flexMaximumInstanceCountDefault'));
    assert.equal(Math.min(...both.map((c) => c.ordersPerSecond as number)), 100 / 18);
    const tablesOnly = enforcedCeilings(
      load,
      { ...d, indexPartitionsPerState: 2 },
      s,
      { spreadTables: ['OrderIndex'] },
      {
        tables: true,
        serviceBusCredits: false,
      },
    );
    // 10 entities per order over 2 partitions, 200 entities/s each: 40 orders/s.
    assert.equal(Math.min(...tablesOnly.map((c) => c.ordersPerSecond as number)), 40);
  });

  it('takes the clock-driven load off a limit before dividing it by the load per order', () => {
    // k = 500: 40 requests/s per account. 16 requests per order; the sweeps take 8/s at rest.
    const s = scaledLimits(limits, 500);
    const clock = clockLoadAtRest(
      { devstoreaccount1: { requests: 8 }, orders2: { requests: 2 } },
      { 'state:Pending:1': 0.5, 'state:Pending:7': 1 },
      3,
    );
    assert.equal(clock.accountRequestsPerSecond, 8, 'the busiest account');
    assert.deepEqual(clock.partitionEntitiesPerSecond, { 'OrderIndex/state:Pending:#': 1 });
    const account = (accounts: number, c = clock) =>
      enforcedCeilings(
        load,
        { ...d, storageAccounts: accounts },
        s,
        { spreadTables: ['OrderIndex'] },
        {
          tables: true,
          serviceBusCredits: true,
        },
        c,
      ).find((x) => x.source === 'storageAccountRequestsPerSecond');
    assert.equal(account(1)?.ordersPerSecond, (40 - 8) / 16);
    assert.equal(account(1)?.clockLoad, 8);
    // Two accounts: each carries half of every order, and the busiest keeps its clock load.
    assert.equal(account(2)?.ordersPerSecond, (40 - 8) / 8);
    // Without a clock load the model is what it was.
    assert.equal(account(1, {})?.ordersPerSecond, 40 / 16);
    // A clock load past the limit leaves nothing for orders (never a negative ceiling).
    assert.equal(account(1, { accountRequestsPerSecond: 50 })?.ordersPerSecond, 0);
    const partition = enforcedCeilings(
      load,
      d,
      s,
      { spreadTables: ['OrderIndex'] },
      {
        tables: true,
        serviceBusCredits: true,
      },
      clock,
    ).find((x) => x.source === 'tablePartitionEntitiesPerSecond');
    // 4 entities/s per partition at k = 500, 1 of them on a clock; 10 entities per order.
    assert.equal(partition?.ordersPerSecond, (4 - 1) / 10);
    const credits = enforcedCeilings(
      load,
      d,
      s,
      { spreadTables: ['OrderIndex'] },
      {
        tables: true,
        serviceBusCredits: true,
      },
      clock,
    ).find((x) => x.source === 'serviceBusStandardCreditsPerSecond');
    // 2 credits/s at k = 500, 3 of them spent at rest: nothing left for orders.
    assert.equal(credits?.ordersPerSecond, 0);
  });

  it('compare says whether a measurement is within the tolerance', () => {
    assert.deepEqual(compare(4, 3.2), { error: -0.19999999999999996, within: true });
    assert.equal(compare(4, 2.9).within, false);
  });
});
