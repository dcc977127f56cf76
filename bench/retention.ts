import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { ServiceBusClient } from '@azure/service-bus';
import { defaultRetention, type RetentionPolicy } from '../shared/domain/retention.js';
import { Retention } from '../shared/retention/retention.js';
import { serviceBusLiveWork } from '../shared/retention/liveWork.js';
import { StateStore, StoreMetrics } from '../shared/stateStore/index.js';
import { fullRepairBudget } from '../shared/supervisor/repairBudget.js';
import { devAccountKey, devAccountName, startAzurite } from '../local/azurite.js';
import { startBlobProxy } from './blobProxy.js';
import { startBenchStack, type BenchStack } from './benchStack.js';
import { parsePriceTable } from './pricing.js';
import { fullPassFigures, seedFinished as seed } from './fullPass.js';
import { purgeCostPerMillion } from './purgeCost.js';
import { diffCounts } from './stats.js';
import { startTableProxy } from './tableProxy.js';
import { measureActualRaw } from './throughput.js';

/**
 * `npm run bench:retention [-- --quick] [--orders=N] [--rounds=N]` (issue 24, items 6 and 8), bounded:
 * 1. purge throughput at full speed and its cost: N orders that finished days ago (seeded through
 *    the real store: order, state, steps, history, index groups) purged slice after slice through
 *    counting proxies in front of Azurite's table and blob endpoints; orders/s, table transactions
 *    and blob operations per order, dollars per million orders (bench/prices.json);
 * 2. the daily full repair pass over the same N retained orders: rows/s, and its duration at 10
 *    million retained orders, in wall time and as the Supervisor spreads it (fullRepairBudget per
 *    30-s run; bench/fullPass.ts);
 * 3. live throughput on the local stack with and without a purge running at the product's rate,
 *    windows alternating in one run; the ratio (issue: >= 0.9). The purge runs in the bench process,
 *    as on another instance: it sees the live orders through the queues' heads, as in Azure.
 */
const quick = process.argv.includes('--quick');
const argOrders = /^--orders=(\d+)$/.exec(process.argv.find((a) => a.startsWith('--orders=')) ?? '')?.[1];
const expired = argOrders ? Number(argOrders) : quick ? 500 : 2000;
const argRounds = /^--rounds=(\d+)$/.exec(process.argv.find((a) => a.startsWith('--rounds=')) ?? '')?.[1];
const live = {
  ...(quick ? { rounds: 2, orders: 30 } : { rounds: 3, orders: 60 }),
  ...(argRounds ? { rounds: Number(argRounds) } : {}),
  concurrency: 4,
};
const log = (line: string) => process.stdout.write(`${line}\n`);

async function purgeSection(prices: ReturnType<typeof parsePriceTable>) {
  const azurite = await startAzurite({ services: ['table', 'blob'] });
  const tableProxy = await startTableProxy();
  tableProxy.setUpstream(azurite.tableUrl.replace(/\/[^/]+$/, ''));
  const blobPort = Number(new URL(azurite.blobUrl!).port);
  const blobProxy = await startBlobProxy(blobPort);
  const counted =
    `DefaultEndpointsProtocol=http;AccountName=${devAccountName};AccountKey=${devAccountKey};` +
    `BlobEndpoint=http://127.0.0.1:${blobProxy.port}/${devAccountName};` +
    `TableEndpoint=http://127.0.0.1:${tableProxy.port}/${devAccountName};`;
  try {
    const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
    const tables = {
      ordersTable: `Orders${suffix}`,
      inFlightTable: `InFlight${suffix}`,
      stateIndexTable: `OrderIndex${suffix}`,
    };
    const direct = await StateStore.open(
      { kind: 'connectionString', connectionString: azurite.connectionString },
      tables,
    );
    const seedMs = await seed(direct, expired);
    log(`seeded ${expired} orders that finished 3 days ago in ${(seedMs / 1000).toFixed(1)} s`);

    const metrics = new StoreMetrics();
    const connection = { kind: 'connectionString' as const, connectionString: counted };
    const store = await StateStore.open(connection, { ...tables, metrics });
    const pass = await fullPassFigures(store, expired);

    // Full speed: the rate setting far above what the slice can do, so the figure is the capacity.
    const policy: RetentionPolicy = {
      ...defaultRetention,
      orderRetentionDays: 1,
      purgeRatePerSecond: 100_000,
    };
    const retention = await Retention.open(store, connection, policy, connection, {
      table: `Retention${suffix}`,
      container: `archive-${suffix}`,
    });
    const tables0 = tableProxy.snapshot();
    const blobs0 = blobProxy.snapshot();
    const t0 = performance.now();
    let purged = 0;
    let slices = 0;
    for (;;) {
      const r = await retention.purgeNow(new Date(), 500);
      purged += r.purged;
      slices += 1;
      if (!r.more && r.resumed === 0) break;
    }
    const purgeMs = performance.now() - t0;
    const t = diffCounts(tableProxy.snapshot(), tables0);
    const b = diffCounts(blobProxy.snapshot(), blobs0);
    const perOrder = {
      tableTransactions: (t.transactions ?? 0) / purged,
      blobWrites: (b.write ?? 0) / purged,
      blobReads: (b.read ?? 0) / purged,
      blobLists: (b.list ?? 0) / purged,
    };
    const cost = purgeCostPerMillion(perOrder, prices);
    return {
      purge: {
        purged,
        slices,
        seconds: purgeMs / 1000,
        ordersPerSecond: (purged / purgeMs) * 1000,
        perOrder,
        cost,
        blobOperationsPerMillion: (perOrder.blobWrites + perOrder.blobReads + perOrder.blobLists) * 1e6,
      },
      pass,
    };
  } finally {
    await tableProxy.close();
    await blobProxy.close();
    await azurite.stop();
  }
}

/** Section 3: live orders/s with and without a purge at the product's rate, alternating. */
async function liveSection(bench: BenchStack) {
  const connection = { kind: 'connectionString' as const, connectionString: bench.countedTables };
  const store = await StateStore.open(connection);
  const toPurge = live.rounds * 400;
  await seed(store, toPurge);
  const policy: RetentionPolicy = { ...defaultRetention, orderRetentionDays: 1 };
  const bus = new ServiceBusClient(bench.countedServiceBus);
  const retention = await Retention.open(store, connection, policy, connection, {
    liveWork: serviceBusLiveWork(bus),
  });
  // Warm-up: the first orders pay for connections and JIT.
  await measureActualRaw(bench, live.concurrency, 8);
  const windows: { purging: boolean; orders: number; ms: number; purged: number; pausedMs: number }[] = [];
  for (let round = 0; round < live.rounds; round++) {
    for (const purging of round % 2 === 0 ? [false, true] : [true, false]) {
      let stop = false;
      let purged = 0;
      let pausedMs = 0;
      // Slices of 20 at the product's rate (20/s): one second each, so the loop stops with the window.
      const purge = purging
        ? (async () => {
            while (!stop) {
              const r = await retention.purgeNow(new Date(), 20);
              purged += r.purged;
              pausedMs += r.pausedMs;
            }
          })()
        : Promise.resolve();
      const r = await measureActualRaw(bench, live.concurrency, live.orders);
      stop = true;
      await purge;
      windows.push({ purging, orders: r.latencies.length, ms: r.elapsedMs, purged, pausedMs });
    }
  }
  const rate = (w: typeof windows) =>
    (w.reduce((n, x) => n + x.orders, 0) / w.reduce((n, x) => n + x.ms, 0)) * 1000;
  const without = rate(windows.filter((w) => !w.purging));
  const withPurge = rate(windows.filter((w) => w.purging));
  const purgedLive = windows.reduce((n, w) => n + w.purged, 0);
  const purgingMs = windows.filter((w) => w.purging).reduce((n, w) => n + w.ms, 0);
  // After the windows, with nothing live: the same purge (same signal) at full speed, once the
  // queue heads' readings (cached a second per queue) have aged out.
  await new Promise((r) => setTimeout(r, 4100));
  const q0 = performance.now();
  let quietPurged = 0;
  while (performance.now() - q0 < 5000) {
    const r = await retention.purgeNow(new Date(), 20);
    quietPurged += r.purged;
    if (!r.more) break;
  }
  const quietRate = (quietPurged / (performance.now() - q0)) * 1000;
  await bus.close();
  return {
    quietRate,
    pausedShare: windows.reduce((n, w) => n + w.pausedMs, 0) / purgingMs,
    windows,
    withoutPurge: without,
    withPurge,
    ratio: withPurge / without,
    purgeRateDuring: (purgedLive / purgingMs) * 1000,
  };
}

async function main(): Promise<void> {
  const prices = parsePriceTable(
    JSON.parse(readFileSync(join(__dirname, '..', '..', 'bench', 'prices.json'), 'utf8')) as unknown,
  );
  const started = Date.now();
  log(
    `bench:retention: ${quick ? 'quick' : 'full'} run, ${expired} expired orders, ${live.rounds} live rounds; load average ${loadavg()[0].toFixed(2)} at the start (${cpus().length} cores)`,
  );
  const { purge, pass } = await purgeSection(prices);
  const bench = await startBenchStack({ SUPERVISOR_SCHEDULE: '*/1 * * * * *', STEP_TIMEOUT_SECONDS: '5' });
  let liveFigures;
  try {
    liveFigures = await liveSection(bench);
  } finally {
    await bench.stop();
  }
  const f = (v: number, d = 1) => v.toFixed(d);
  log('');
  log('retention figures (one run, side by side)');
  log(
    `  purge throughput, full speed       ${f(purge.ordersPerSecond)} orders/s (${purge.purged} orders, ${purge.slices} slices, ${f(purge.seconds)} s)`,
  );
  log(
    `  per purged order                   ${f(purge.perOrder.tableTransactions, 2)} table transactions, ${f(purge.perOrder.blobWrites, 2)} blob writes, ${f(purge.perOrder.blobReads, 2)} blob reads, ${f(purge.perOrder.blobLists, 3)} blob lists`,
  );
  const blobPrice = prices.blobStorage?.hotWritePer10k.value;
  log(
    `  cost per million purged orders     ${purge.cost.total === null ? 'n/a' : `$${f(purge.cost.total, 2)}`}: $${f(purge.cost.table, 2)} table transactions (at $${prices.tableStorage.per10kTransactions.value} per 10k) + ${purge.cost.blob === null ? `${f(purge.blobOperationsPerMillion / 1e4, 0)} x 10k blob operations (blob prices not in bench/prices.json)` : `$${f(purge.cost.blob, 2)} blob operations (Hot: $${blobPrice} per 10k writes)`}`,
  );
  log(`  live throughput without purge      ${f(liveFigures.withoutPurge, 2)} orders/s`);
  log(
    `  live throughput with purge         ${f(liveFigures.withPurge, 2)} orders/s (purge at ${f(liveFigures.purgeRateDuring)} orders/s beside them, paused ${f(liveFigures.pausedShare * 100, 0)} % of the time for live work; the product's rate ${defaultRetention.purgeRatePerSecond}/s)`,
  );
  log(
    `  the same purge, nothing live       ${f(liveFigures.quietRate)} orders/s (after the windows, same signal, 5 s at most)`,
  );
  log(
    `  live ratio with/without            ${f(liveFigures.ratio, 3)} (required >= 0.9: ${liveFigures.ratio >= 0.9 ? 'met' : 'NOT met'})`,
  );
  log(
    `  full repair pass                   ${pass.rows} rows (${pass.retained} retained orders) in ${f(pass.wallMs / 1000)} s: ${f(pass.ordersPerSecond)} orders/s; state rows ${f(pass.orderRowsPerSecond)}/s, index entries ${f(pass.entriesPerSecond)}/s`,
  );
  const b = fullRepairBudget;
  log(
    `  full pass at 10 million retained   ${f(pass.atTenMillion.wallHours)} h of work; as the Supervisor spreads it (${b.pagesPerRun} pages or ${b.budgetMs / 1000} s per 30-s run) ${f(pass.supervisorOrdersPerSecond)} orders/s, ${f(pass.atTenMillion.supervisorHours)} h (within its day: ${pass.atTenMillion.supervisorHours <= 24 ? 'yes' : 'NO'}; ${f(24 / pass.atTenMillion.supervisorHours, 2)}x headroom)`,
  );
  log(
    `  windows (alternating)              ${liveFigures.windows.map((w) => `${w.purging ? 'P' : '-'}:${f((w.orders / w.ms) * 1000, 2)}`).join(' ')}`,
  );
  log(`bench:retention took ${f((Date.now() - started) / 1000, 0)} s`);
}

void main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
