import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { loadConfig } from '../emulators/servicebus/config.js';
import { spawnLocalHost, type SpawnedLocalHost } from '../local/host/index.js';
import { StateStoreAccounts } from '../shared/stateStore/accounts.js';
import { defaultIndexPartitions } from '../shared/stateStore/indexLayout.js';
import { devAccountName } from '../local/azurite.js';
import { localOrderAccounts } from '../local/stack.js';
import type { OrderState, ProcessState } from '../shared/domain/index.js';
import {
  chaosSettings,
  drain,
  listAllOrderIds,
  lostOrderBound,
  readQueues,
  type ChaosContext,
  type Submitted,
} from '../chaos/harness.js';
import { checkInvariants, type CheckResult } from '../chaos/invariants.js';
import {
  orderBody,
  sleep,
  startBenchStack,
  statusFeedPath,
  terminalStates,
  type BenchStack,
} from './benchStack.js';
import { binding, type ClockLoad, type Deployment, type Layout, type OrderLoad } from './capacityModel.js';
import { parseLimitTable } from './limits.js';
import { NamespaceCredits } from './serviceBusCredits.js';
import { clockLoadAtRest, compare, enforcedCeilings, scaledLimits } from './simulationModel.js';
import {
  accountLoads,
  busiestPartitions,
  cpuBusyShare,
  perOrderCounts,
  cpuSample,
  indexPartitionRates,
  requestsPerOrder,
  type AccountLoad,
} from './simulationLoad.js';
import { percentile, formatTable, type Counts } from './stats.js';
import { operationBreakdown, type OperationLoad } from './tableOps.js';
import { TableThrottle } from './tableThrottle.js';

/**
 * `npm run bench:simulation [-- --quick]` (issue 23, item 3): Azure's limits divided by k,
 * enforced at the servers (the table proxy per partition and per account, the emulator's
 * credits per namespace), a closed loop of clients against 1, 2 and 4 local hosts, and the
 * capacity model's ceiling at the same scaled limits beside the measured one. Each run then
 * drains and checks the chaos invariants: past a ceiling orders must slow down, never be lost,
 * end in Error or have a duplicate effect.
 *
 * The per-order loads come from the capacity bench (bench/results/capacity.json, or --from FILE).
 * Flags: --quick (shorter windows), --only name[,name], --clients N (every run; default 48, 96 for
 * the partition runs), --k-standard K (runs (a)), --k-tables K (the partition runs of (b)),
 * --k-accounts K (the account runs of (b)), --rest-seconds S (the at-rest window),
 * --settle-seconds S (longest wait for the start-up burst), --max-warmup-seconds S,
 * --measure-seconds S (the window; 15 quick, 30 full).
 */
const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes('--quick');
const root = resolve(__dirname, '..', '..');
const log = (line: string) => process.stdout.write(`${line}\n`);
const layout: Layout = { spreadTables: ['OrderIndex'], fixedSpread: { InFlight: 256 } };

/** Step timeouts long enough that waiting on a throttle is waiting, as in Azure (60 s default). */
const settings: Record<string, string> = {
  ...chaosSettings,
  STEP_TIMEOUT_SECONDS: '30',
  CLAIM_TIMEOUT_SECONDS: '30',
  SUPERVISOR_SCHEDULE: '*/2 * * * * *',
};

export interface SimRun {
  name: string;
  /** Which check of issue 23 item 3 the run belongs to. */
  part: 'machine' | 'a' | 'b';
  /** What a (b) run raises: the index partitions per state or the storage accounts. */
  varies?: 'partitions' | 'accounts';
  hosts: number;
  /** ORDER_INDEX_PARTITIONS. */
  partitions: number;
  /** Storage accounts orders are spread over (StateStoreAccounts), each throttled on its own. */
  accounts: number;
  /** Limits divided by k; Infinity enforces nothing. */
  k: number;
  serviceBusCredits: boolean;
  /** Clients in the closed loop when --clients does not say (default 48). */
  clients?: number;
}

const kStandard = Number(flag('k-standard') ?? 14);
const kTables = Number(flag('k-tables') ?? 100);
// High enough that the account (16 requests per order) binds before any partition does at the
// default 32 index partitions per state: 20,000/k/16.2 = 2.47 orders/s per account at k = 500.
const kAccounts = Number(flag('k-accounts') ?? 500);
const accounts = Number(flag('accounts') ?? 1);
const runs: SimRun[] = [
  {
    name: 'machine',
    part: 'machine',
    hosts: 1,
    partitions: defaultIndexPartitions,
    accounts,
    k: Infinity,
    serviceBusCredits: false,
  },
  ...[1, 2, 4].map((hosts): SimRun => ({
    name: `default-${hosts}h`,
    part: 'a',
    hosts,
    partitions: defaultIndexPartitions,
    accounts,
    k: kStandard,
    serviceBusCredits: true,
  })),
  ...[1, 2].map((partitions): SimRun => ({
    name: `partitions-${partitions}`,
    part: 'b',
    varies: 'partitions',
    hosts: 2,
    partitions,
    accounts,
    k: kTables,
    serviceBusCredits: false,
    // At P = 2 an order waits 8-17 s on its partition: 48 clients ask for fewer than the 4
    // orders/s the model allows (x1.51 measured at 48 on 2026-11-26 03:51, x1.92 at 96).
    clients: 96,
  })),
  ...[1, 2].map((n): SimRun => ({
    name: `accounts-${n}`,
    part: 'b',
    varies: 'accounts',
    hosts: 2,
    partitions: defaultIndexPartitions,
    accounts: n,
    k: kAccounts,
    serviceBusCredits: false,
  })),
];
const only = flag('only')?.split(',');
const clientsFlag = flag('clients');
const clientsOf = (run: SimRun): number => Number(clientsFlag ?? run.clients ?? 48);
const warmupMs = quick ? 6_000 : 10_000;
/** The longest warm-up: the window opens then even if fewer orders than clients have ended. */
const maxWarmupMs = Number(flag('max-warmup-seconds') ?? 90) * 1000;
/** The deployment at rest before the clients start: its clock-driven load, per second. */
const restMs = Number(flag('rest-seconds') ?? (quick ? 10 : 20)) * 1000;
/**
 * Start-up is not rest: each host's first Supervisor runs query every index partition of every
 * account (the retention purge's first slice, then idle for ten minutes; the repair pass the empty
 * ledger makes due), a burst that at k = 500 fills an account for tens of seconds. The rest window
 * and the clients wait until a 3 s slice has no OrderIndex request (at most --settle-seconds).
 */
const settleMaxMs = Number(flag('settle-seconds') ?? 120) * 1000;

async function settle(bench: BenchStack): Promise<number> {
  const t0 = performance.now();
  await sleep(3_000);
  for (;;) {
    const from = bench.counters();
    await sleep(3_000);
    const to = bench.counters();
    const index = Object.keys(to)
      .filter((k) => /^table\.account\.[^.]+\.table\.OrderIndex\./.test(k))
      .reduce((n, k) => n + to[k] - (from[k] ?? 0), 0);
    if (index === 0 || performance.now() - t0 > settleMaxMs) return (performance.now() - t0) / 1000;
  }
}
const measureMs = Number(flag('measure-seconds') ?? (quick ? 15 : 30)) * 1000;

interface RunResult {
  run: SimRun;
  /** The model per order only (as before the clock-driven term). */
  predicted: number | null;
  /** The model with the clock-driven load measured at rest (ClockLoad): the figure (a) and (b) check. */
  predictedWithClock: number | null;
  bindingResource: string;
  bindingWithClock: string;
  clock: ClockLoad;
  measured: number;
  completed: number;
  submitted: number;
  p50: number;
  p95: number;
  refusedPosts: number;
  clients: number;
  tableRefusals: { partition: number; account: number };
  /** Refusals per account and the busiest refused partitions (`{account}/{table}/{partition}`). */
  refusedBy: { account: Record<string, number>; partition: Record<string, number> };
  /** Table requests per second each account served in the window (the proxy's count). */
  accountRequestsPerSecond: Record<string, number>;
  serviceBusRefusals: number;
  /** Per account: requests/s at rest (no orders) and in the window, by table. */
  rest: Record<string, AccountLoad>;
  window: Record<string, AccountLoad>;
  /** OrderIndex entities/s per partition at rest and in the window. */
  restIndex: Record<string, number>;
  /** The partitions with the most requests per second at rest and in the window. */
  restPartitions: Record<string, number>;
  /** Seconds from start-up until the burst of first runs was over (settle). */
  settledSeconds: number;
  /** The binding resource's use in the window over its scaled limit (1 = full). */
  bindingUse: number | null;
  /** Seconds from the first client's start until the window opened (the loop full). */
  warmedUpSeconds: number;
  /** Per order completed in the window: table answers by status, Service Bus sends/deliveries/abandons. */
  perOrder: Record<string, number>;
  windowPartitions: Record<string, number>;
  /** The state index's Pending family per completed order in the window, by operation and outcome. */
  pendingOperations: OperationLoad[];
  /**
   * Groups the state index still counts in Pending and Processing after the drain (every order is
   * terminal then): removals refused past every retry, left for the repair pass, which pays their
   * 5 entities each later. Null when the counts could not be read.
   */
  leftInIndex: { Pending: number; Processing: number } | null;
  /** `measured` had the window also paid the dropped removals (5 entities each on Pending). */
  measuredWithDeferred: number | null;
  windowIndex: Record<string, number>;
  /** Service Bus credits/s paid at rest and in the window (when credits are enforced). */
  restCredits: number;
  windowCredits: number;
  /** Share of the machine's cores busy in the window (every process, not only the bench's). */
  cpuBusy: number;
  loadAverage: number;
  /** Orders the clients saw end in the store without their terminal status event. */
  missingEvents: number;
  busiestPartition: { key: string; entitiesPerSecond: number };
  invariants: Pick<
    CheckResult,
    'orders' | 'lost' | 'phantoms' | 'duplicateEffects' | 'byState' | 'violations' | 'worstSeconds'
  >;
}

function topicRules(): Record<string, number> {
  const config = loadConfig(join(root, 'infra', 'servicebus-emulator', 'Config.json'));
  return Object.fromEntries(
    config.topics.map((t) => [t.name.toLowerCase(), t.subscriptions.reduce((s, x) => s + x.rules.length, 0)]),
  );
}

async function post(baseUrl: string, functionKey: string): Promise<string | undefined> {
  try {
    const res = await fetch(`${baseUrl}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-functions-key': functionKey },
      body: JSON.stringify(orderBody()),
    });
    const text = await res.text();
    return res.status === 202 ? (JSON.parse(text) as { orderId: string }).orderId : undefined;
  } catch {
    return undefined;
  }
}

/** Entities per second through the busiest OrderIndex partition in a counter window. */
function busiest(
  before: Record<string, number>,
  after: Record<string, number>,
  seconds: number,
): { key: string; entitiesPerSecond: number } {
  const per = new Map<string, number>();
  for (const [k, v] of Object.entries(after)) {
    const m = /^table\.part\.(OrderIndex\/[^.]*)\.(read|written)$/.exec(k);
    if (m) per.set(m[1], (per.get(m[1]) ?? 0) + v - (before[k] ?? 0));
  }
  let best = { key: '-', entitiesPerSecond: 0 };
  for (const [key, n] of per)
    if (n / seconds > best.entitiesPerSecond) best = { key, entitiesPerSecond: n / seconds };
  return best;
}

/** Requests per second each account served in a counter window. */
function perAccount(
  before: Record<string, number>,
  after: Record<string, number>,
  seconds: number,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const m = /^table\.account\.([^.]*)\.transactions$/.exec(k);
    if (m) out[m[1]] = (v - (before[k] ?? 0)) / seconds;
  }
  return out;
}

/** The `n` keys refused most, with their counts. */
function top(counts: Record<string, number>, n: number): Record<string, number> {
  return Object.fromEntries(
    Object.entries(counts)
      .sort((a, b) => b[1] - a[1])
      .slice(0, n),
  );
}

async function simulate(
  run: SimRun,
  load: OrderLoad,
  limits: ReturnType<typeof parseLimitTable>,
): Promise<RunResult> {
  const enforced = Number.isFinite(run.k);
  const scaled = enforced ? scaledLimits(limits, run.k) : limits;
  const deployment: Deployment = {
    serviceBusTier: run.serviceBusCredits ? 'Standard' : 'Premium',
    messagingUnits: run.serviceBusCredits ? 0 : 1,
    serviceBusNamespaces: 1,
    storageAccounts: run.accounts,
    indexPartitionsPerState: run.partitions,
    maxInstances: 100,
    perInstanceConcurrency: 16,
    instanceMemoryMB: 512,
  };
  const enforcedHere = { tables: true, serviceBusCredits: run.serviceBusCredits };
  const cs = enforced ? enforcedCeilings(load, deployment, scaled, layout, enforcedHere) : [];
  const b = cs.length > 0 ? binding(cs) : undefined;
  const tableThrottle = enforced
    ? new TableThrottle({
        partitionEntitiesPerSecond: scaled.value('tablePartitionEntitiesPerSecond'),
        accountRequestsPerSecond: scaled.value('storageAccountRequestsPerSecond'),
      })
    : undefined;
  const credits =
    enforced && run.serviceBusCredits
      ? new NamespaceCredits(
          scaled.value('serviceBusStandardCreditsPerSecond'),
          topicRules(),
          (p) => p.toLowerCase() === statusFeedPath,
        )
      : undefined;
  const bench: BenchStack = await startBenchStack(
    { ...settings, ORDER_INDEX_PARTITIONS: String(run.partitions) },
    undefined,
    { tableThrottle, serviceBusCredits: credits, storageAccounts: run.accounts },
  );
  const extra: SpawnedLocalHost[] = [];
  try {
    for (let i = 1; i < run.hosts; i++)
      extra.push(await spawnLocalHost({ appRoot: root, env: bench.stack.env, httpPort: 0 }));
    const urls = [bench.stack.baseUrl, ...extra.map((h) => h.baseUrl)];
    const submitted = new Map<string, Submitted>();
    const done: Array<{ at: number; latency: number }> = [];
    // The clients' own view of the store (not throttled): the fallback when no status event comes.
    const store = await StateStoreAccounts.open(
      [devAccountName, ...localOrderAccounts(run.accounts)].map((a) => ({
        kind: 'connectionString' as const,
        connectionString:
          a === devAccountName
            ? bench.stack.azurite.connectionString
            : bench.stack.azurite.tableConnectionString(a),
      })),
    );
    let missingEvents = 0;
    /** Terminal per the status feed, or per the state row when the feed stays silent (counted). */
    const terminal = async (orderId: string, until: number): Promise<number | undefined> => {
      let seen: number | undefined;
      const feed = bench.status.waitFor(orderId, Math.max(1, until - performance.now())).then(
        (v) => (seen ??= v.at),
        () => undefined,
      );
      while (seen === undefined && performance.now() < until) {
        await Promise.race([feed, sleep(5_000)]);
        if (seen !== undefined) break;
        const loaded = await store.load(orderId).catch(() => undefined);
        if (loaded && terminalStates.has(loaded.state.processState)) {
          // The order ended but its status event did not arrive (yet): a finding, and a completion.
          await Promise.race([feed, sleep(2_000)]);
          if (seen === undefined) {
            missingEvents += 1;
            seen = performance.now();
          }
        }
      }
      return seen;
    };
    // At rest: the hosts' sweeps, repair passes and whatever else runs on a clock, with no
    // orders, over the same deployment (the first seconds after start-up left out).
    const settled = await settle(bench);
    const restBefore = bench.counters();
    const restCreditsBefore = credits?.paid ?? 0;
    const r0 = performance.now();
    await sleep(restMs);
    const restSeconds = (performance.now() - r0) / 1000;
    const restAfter = bench.counters();
    const restCredits = ((credits?.paid ?? 0) - restCreditsBefore) / restSeconds;
    const clock = clockLoadAtRest(
      accountLoads(restBefore, restAfter, restSeconds),
      indexPartitionRates(restBefore, restAfter, restSeconds),
      restCredits,
    );
    const csClock = enforced ? enforcedCeilings(load, deployment, scaled, layout, enforcedHere, clock) : [];
    const bClock = csClock.length > 0 ? binding(csClock) : undefined;
    let refusedPosts = 0;
    let next = 0;
    const clients = clientsOf(run);
    const t0 = performance.now();
    // The window opens once the closed loop is full: the warm-up has passed and as many orders
    // have ended as there are clients (each client has been round once), or at the latest after
    // maxWarmupMs. A ceiling far under the clients' demand makes orders take tens of seconds; a
    // window opened before the first of them end counts the loop filling up, not its throughput.
    let windowFrom = Infinity;
    let stopAt = t0 + maxWarmupMs + measureMs;
    // The window's counters are read at its ends, not after the clients stop waiting.
    let before: Counts = {};
    let after: Counts = {};
    let cpuFrom = cpuSample();
    let cpuTo = cpuFrom;
    let creditsFrom = 0;
    let creditsTo = 0;
    let snapEnd: NodeJS.Timeout | undefined;
    const open = () => {
      if (windowFrom !== Infinity) return;
      windowFrom = performance.now();
      stopAt = windowFrom + measureMs;
      before = bench.counters();
      cpuFrom = cpuSample();
      creditsFrom = credits?.paid ?? 0;
      snapEnd = setTimeout(() => {
        after = bench.counters();
        cpuTo = cpuSample();
        creditsTo = credits?.paid ?? 0;
      }, measureMs);
    };
    const snap = setTimeout(open, maxWarmupMs);
    const minWarmup = setTimeout(() => {
      if (done.length >= clients) open();
    }, warmupMs);
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (performance.now() < stopAt) {
          const url = urls[next++ % urls.length];
          const sentAt = performance.now();
          const orderId = await post(url, bench.stack.functionKey);
          if (!orderId) {
            // Not acknowledged: a client tries again (the door or a throttled write said no).
            refusedPosts += 1;
            await sleep(250);
            continue;
          }
          submitted.set(orderId, { orderId, at: Date.now(), viaStore: false, skus: ['SKU-1'] });
          // Past the window a client stops waiting: the drain below follows what is left.
          const at = await terminal(orderId, stopAt + 5_000);
          if (at !== undefined) done.push({ at, latency: at - sentAt });
          if (done.length >= clients && performance.now() >= t0 + warmupMs) open();
        }
      }),
    );
    clearTimeout(snap);
    clearTimeout(minWarmup);
    clearTimeout(snapEnd);
    const warmedUpSeconds = (windowFrom - t0) / 1000;
    const inWindow = done.filter((d) => d.at >= windowFrom && d.at < stopAt);
    const windowSeconds = measureMs / 1000;
    // How full the model's binding resource was in the window (1 = at its scaled limit): under
    // about 0.9 the ceiling was not reached, and the clients or the machine bound instead.
    const windowAccounts = accountLoads(before, after, windowSeconds);
    const bindingUse = !bClock
      ? null
      : bClock.source === 'storageAccountRequestsPerSecond'
        ? Math.max(0, ...Object.values(windowAccounts).map((a) => a.requests)) / (bClock.limit as number)
        : bClock.source === 'tablePartitionEntitiesPerSecond'
          ? Math.max(0, ...Object.values(indexPartitionRates(before, after, windowSeconds))) /
            (bClock.limit as number)
          : bClock.source === 'serviceBusStandardCreditsPerSecond'
            ? (creditsTo - creditsFrom) / windowSeconds / (bClock.limit as number)
            : null;
    // Drain: every acknowledged order must end, then the invariants of DESIGN.md.
    const ctx = {
      stack: bench.stack,
      store,
      submitted,
      attempted: new Set(submitted.keys()),
      // Nothing is seeded here: every stored order came through the API (checkInvariants reads it).
      seeded: new Set<string>(),
      serviceBus: bench.stack.serviceBus,
      ledgers: () => ({
        inventory: bench.stack.remote.inventory.ledger(),
        payment: bench.stack.remote.payment.ledger(),
        shipping: bench.stack.remote.shipping.ledger(),
      }),
    } as unknown as ChaosContext;
    const observed = new Map<string, ProcessState[]>();
    const bound = lostOrderBound(settings, 3, Math.ceil((warmedUpSeconds * 1000 + measureMs) / 1000));
    const finals: Map<string, OrderState> = await drain(ctx, Date.now() + bound.seconds * 1000, (s) => {
      const seen = observed.get(s.orderId) ?? [];
      if (seen[seen.length - 1] !== s.processState) seen.push(s.processState);
      observed.set(s.orderId, seen);
    });
    // Every account's Orders table (listAllOrderIds reads one store's).
    const [storedPerAccount, queues] = await Promise.all([
      Promise.all(store.stores.map((s) => listAllOrderIds({ ...ctx, store: s } as unknown as ChaosContext))),
      readQueues(ctx),
    ]);
    const stored = new Set(storedPerAccount.flatMap((ids) => [...ids]));
    const check = checkInvariants({
      ctx,
      finals,
      stored,
      observed,
      deadLetters: queues.deadLetters,
      alerts: queues.alerts,
      boundSeconds: bound.seconds,
    });
    // Read after the invariants: a removal still being retried in a host's background has had time.
    const counted = await store.countsPerState().catch(() => null);
    const leftInIndex = counted ? { Pending: counted.Pending, Processing: counted.Processing } : null;
    if ((check.byState.Error ?? 0) > 0)
      check.violations.push(`${check.byState.Error} order(s) ended in Error under throttling only`);
    const latencies = inWindow.map((d) => d.latency);
    return {
      run,
      predicted: b ? (b.ordersPerSecond as number) : null,
      predictedWithClock: bClock ? (bClock.ordersPerSecond as number) : null,
      bindingResource: b ? b.resource.trim() : 'this machine',
      bindingWithClock: bClock ? bClock.resource.trim() : 'this machine',
      clock,
      measured: inWindow.length / windowSeconds,
      completed: done.length,
      submitted: submitted.size,
      p50: latencies.length ? percentile(latencies, 50) : 0,
      p95: latencies.length ? percentile(latencies, 95) : 0,
      refusedPosts,
      clients,
      tableRefusals: tableThrottle ? { ...tableThrottle.refused } : { partition: 0, account: 0 },
      refusedBy: tableThrottle
        ? {
            account: { ...tableThrottle.refusedBy.account },
            partition: top(tableThrottle.refusedBy.partition, 6),
          }
        : { account: {}, partition: {} },
      accountRequestsPerSecond: perAccount(before, after, windowSeconds),
      serviceBusRefusals: credits?.refused ?? 0,
      rest: accountLoads(restBefore, restAfter, restSeconds),
      window: windowAccounts,
      bindingUse,
      restIndex: indexPartitionRates(restBefore, restAfter, restSeconds),
      restPartitions: busiestPartitions(restBefore, restAfter, restSeconds, 6),
      settledSeconds: settled,
      warmedUpSeconds,
      perOrder: perOrderCounts(before, after, inWindow.length),
      windowPartitions: busiestPartitions(before, after, windowSeconds, 6),
      pendingOperations: operationBreakdown(before, after, inWindow.length, pendingFamily),
      leftInIndex,
      measuredWithDeferred: withDeferred(
        inWindow.length / windowSeconds,
        operationBreakdown(before, after, inWindow.length, pendingFamily),
        leftInIndex,
        check.orders,
      ),
      windowIndex: indexPartitionRates(before, after, windowSeconds),
      restCredits,
      windowCredits: (creditsTo - creditsFrom) / windowSeconds,
      cpuBusy: cpuBusyShare(cpuFrom, cpuTo),
      loadAverage: loadavg()[0],
      missingEvents,
      busiestPartition: busiest(before, after, windowSeconds),
      invariants: {
        orders: check.orders,
        lost: check.lost,
        phantoms: check.phantoms,
        duplicateEffects: check.duplicateEffects,
        byState: check.byState,
        violations: check.violations,
        worstSeconds: check.worstSeconds,
      },
    };
  } finally {
    for (const h of extra) await h.kill('SIGTERM').catch(() => undefined);
    await bench.stop();
  }
}

/** Throughput had the window paid the Pending removals dropped over the run (5 entities each). */
function withDeferred(
  measured: number,
  ops: OperationLoad[],
  left: { Pending: number } | null,
  orders: number,
): number | null {
  if (!left || ops.length === 0 || orders === 0) return null;
  const paid = ops
    .filter((o) => !o.outcome.startsWith('refused'))
    .reduce((n, o) => n + o.entitiesPerOrder, 0);
  return paid > 0 ? (measured * paid) / (paid + (5 * left.Pending) / orders) : null;
}

/** The binding family of the partition runs: `state:Pending` (P = 1) and `state:Pending:{p}`. */
const pendingFamily = (table: string, group: string): boolean =>
  table === 'OrderIndex' && /^state:Pending(:\{p\})?$/.test(group);

const fmt = (v: number | null, d = 1) => (v === null ? '-' : v.toFixed(d));

async function main(): Promise<void> {
  const started = new Date();
  const from = flag('from') ?? join(root, 'bench', 'results', 'capacity.json');
  const measured = JSON.parse(readFileSync(from, 'utf8')) as { date: string; loads: OrderLoad[] };
  const load = measured.loads.find((l) => l.kind === 'success');
  if (!load) throw new Error(`${from}: no success load`);
  const limits = parseLimitTable(JSON.parse(readFileSync(join(root, 'bench', 'limits.json'), 'utf8')));
  log(
    `bench:simulation ${quick ? '--quick' : '(full)'}: ${cpus().length} cores, Node ${process.version}, ${started.toISOString()}; ` +
      `loads per order from ${from} (measured ${measured.date}); ${clientsFlag ?? '48 (96 for the partition runs)'} clients in a closed loop; ` +
      `window ${measureMs / 1000} s, opened after at least ${warmupMs / 1000} s once as many orders as clients have ended (at most ${maxWarmupMs / 1000} s)`,
  );
  const results: RunResult[] = [];
  for (const run of runs.filter((r) => !only || only.includes(r.name))) {
    log(
      `\n-- ${run.name}: ${run.hosts} host(s), P=${run.partitions}, accounts ${run.accounts}, k=${run.k}, SB credits ${run.serviceBusCredits ? 'enforced' : 'not enforced'}`,
    );
    const r = await simulate(run, load, limits);
    results.push(r);
    log(
      `   model ${fmt(r.predicted, 2)} orders/s per order only, ${fmt(r.predictedWithClock, 2)} with the clock load at rest ` +
        `(${r.bindingWithClock}; clock ${JSON.stringify(r.clock, (_, v: unknown) => (typeof v === 'number' ? Math.round(v * 10) / 10 : v))}), measured ${r.measured.toFixed(2)} orders/s, ` +
        `p50 ${Math.round(r.p50)} ms p95 ${Math.round(r.p95)} ms; refusals: table partition ${r.tableRefusals.partition} ` +
        `account ${r.tableRefusals.account}, SB sends ${r.serviceBusRefusals}, POSTs ${r.refusedPosts}; busiest index ` +
        `partition ${r.busiestPartition.key} ${r.busiestPartition.entitiesPerSecond.toFixed(1)} entities/s; ` +
        `status events missing ${r.missingEvents}; orders ${r.invariants.orders} ${JSON.stringify(r.invariants.byState)} lost ${r.invariants.lost} ` +
        `duplicates ${r.invariants.duplicateEffects} violations ${r.invariants.violations.length}`,
    );
    log(
      `   table requests/s per account ${JSON.stringify(r.accountRequestsPerSecond, (_, v: unknown) => (typeof v === 'number' ? Math.round(v * 10) / 10 : v))}; ` +
        `refused per account ${JSON.stringify(r.refusedBy.account)}; most refused partitions ${JSON.stringify(r.refusedBy.partition)}`,
    );
    log(
      `   start-up burst over after ${r.settledSeconds.toFixed(0)} s; window opened after ${r.warmedUpSeconds.toFixed(0)} s of clients; machine CPU busy ${(r.cpuBusy * 100).toFixed(0)} % of ${cpus().length} cores in the window (load ${r.loadAverage.toFixed(2)}); ` +
        `SB credits/s at rest ${r.restCredits.toFixed(1)}, in the window ${r.windowCredits.toFixed(1)}`,
    );
    const r1 = (v: number) => Math.round(v * 10) / 10;
    const byTable = (t: Record<string, number>) =>
      Object.entries(t)
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k} ${r1(v)}`)
        .join(', ');
    for (const a of [...new Set([...Object.keys(r.rest), ...Object.keys(r.window)])].sort()) {
      const rest = r.rest[a];
      const win = r.window[a] ?? { requests: 0, throttled: 0, byTable: {}, throttledByTable: {} };
      log(
        `   account ${a}: at rest ${r1(rest?.requests ?? 0)} req/s [${byTable(rest?.byTable ?? {})}]; ` +
          `window ${r1(win.requests)} req/s let through [${byTable(win.byTable)}], ${r1(win.throttled)} refused/s ` +
          `[${byTable(win.throttledByTable)}]; per completed order beyond rest ${r1(requestsPerOrder(win, rest, r.measured))}`,
      );
    }
    const hot2 = (x: Record<string, number>) =>
      Object.entries(x)
        .map(([k, v]) => `${k} ${r1(v)}`)
        .join(', ');
    const hot = (x: Record<string, number>) =>
      Object.entries(x)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 4)
        .map(([k, v]) => `${k} ${r1(v)}`)
        .join(', ');
    log(`   OrderIndex entities/s at rest [${hot(r.restIndex)}]; window [${hot(r.windowIndex)}]`);
    log(`   per completed order in the window: ${hot2(r.perOrder)}`);
    log(
      `   busiest partitions, requests/s: at rest [${hot(r.restPartitions)}]; window [${hot(r.windowPartitions)}]`,
    );
    if (r.pendingOperations.length > 0) {
      const sum = (f: (o: OperationLoad) => boolean) =>
        r.pendingOperations.filter(f).reduce((n, o) => n + o.entitiesPerOrder, 0);
      log(
        `   Pending family per completed order: ${r1(sum((o) => !o.outcome.startsWith('refused')))} entities paid, ` +
          `${r1(r.pendingOperations.filter((o) => o.outcome.startsWith('refused')).reduce((n, o) => n + o.requestsPerOrder, 0))} requests refused; by operation:`,
      );
      if (r.leftInIndex) {
        // The removals dropped are load deferred, not saved: what the window would carry with them.
        const deferred = (5 * r.leftInIndex.Pending) / Math.max(1, r.invariants.orders);
        log(
          `   left in the index after the drain: Pending ${r.leftInIndex.Pending}, Processing ${r.leftInIndex.Processing} of ${r.invariants.orders} orders ` +
            `(removals dropped; the repair pays 5 entities each later: ${r1(deferred)} per order); ` +
            `measured with them ${fmt(r.measuredWithDeferred, 2)} orders/s`,
        );
      }
      for (const o of r.pendingOperations)
        log(
          `     ${o.group} ${o.operation} ${o.outcome}: ${o.requestsPerOrder.toFixed(2)} requests, ${o.entitiesPerOrder.toFixed(2)} entities`,
        );
    }
    for (const v of r.invariants.violations.slice(0, 5)) log(`   ! ${v}`);
  }
  log('\n== Model against measurement (limits / k, enforced at the servers) ==');
  log(
    formatTable(
      [
        'run',
        'hosts',
        'P',
        'A',
        'k',
        'clients',
        'binding (model)',
        'per order only',
        'error',
        'model + clock',
        'measured',
        'error',
        'binding use',
        'CPU',
        'p50 ms',
        'throttled',
        'orders',
        'lost/Error/dup',
        'violations',
      ],
      results.map((r) => {
        const c0 = r.predicted === null ? undefined : compare(r.predicted, r.measured);
        const c = r.predictedWithClock === null ? undefined : compare(r.predictedWithClock, r.measured);
        const err = (x: typeof c) =>
          x ? `${x.error >= 0 ? '+' : ''}${(x.error * 100).toFixed(0)} %${x.within ? '' : ' (!)'}` : '-';
        return [
          r.run.name,
          String(r.run.hosts),
          String(r.run.partitions),
          String(r.run.accounts),
          Number.isFinite(r.run.k) ? String(r.run.k) : '-',
          String(r.clients),
          r.bindingWithClock,
          fmt(r.predicted, 2),
          err(c0),
          fmt(r.predictedWithClock, 2),
          r.measured.toFixed(2),
          err(c),
          r.bindingUse === null ? '-' : `${(r.bindingUse * 100).toFixed(0)} %`,
          `${(r.cpuBusy * 100).toFixed(0)} %`,
          String(Math.round(r.p50)),
          `${r.tableRefusals.partition}p/${r.tableRefusals.account}a/${r.serviceBusRefusals}sb`,
          String(r.invariants.orders),
          `${r.invariants.lost}/${r.invariants.byState.Error ?? 0}/${r.invariants.duplicateEffects}`,
          String(r.invariants.violations.length),
        ];
      }),
    ),
  );
  for (const varies of ['partitions', 'accounts'] as const) {
    const b = results.filter((r) => r.run.varies === varies && r.predictedWithClock !== null);
    if (b.length < 2) continue;
    const [lo, hi] = [b[0], b[b.length - 1]];
    const n = (r: RunResult) => (varies === 'partitions' ? r.run.partitions : r.run.accounts);
    const x = (f: (r: RunResult) => number) => (f(hi) / f(lo)).toFixed(2);
    log(
      `  (b) ${varies === 'partitions' ? 'P' : 'accounts'} ${n(lo)} -> ${n(hi)}: model per order only x${x((r) => r.predicted as number)}, ` +
        `model + clock x${x((r) => r.predictedWithClock as number)}, measured x${x((r) => r.measured)} ` +
        `(${((hi.measured / lo.measured / ((hi.predictedWithClock as number) / (lo.predictedWithClock as number)) - 1) * 100).toFixed(0)} % off the model's move)` +
        (lo.measuredWithDeferred && hi.measuredWithDeferred
          ? `; with the dropped removals paid x${x((r) => r.measuredWithDeferred as number)}`
          : ''),
    );
  }
  const violations = results.reduce((s, r) => s + r.invariants.violations.length, 0);
  log(`  violations: ${violations}`);
  const dir = join(root, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'simulation.json');
  writeFileSync(
    file,
    JSON.stringify(
      {
        date: started.toISOString(),
        mode: quick ? 'quick' : 'full',
        loadsFrom: from,
        loadsMeasured: measured.date,
        clients: clientsFlag ?? 'per run',
        warmupMs,
        measureMs,
        settings,
        results,
      },
      null,
      2,
    ) + '\n',
  );
  log(`\nJSON: ${file}  (total ${Math.round((Date.now() - started.getTime()) / 1000)} s)`);
  process.exitCode = violations > 0 ? 1 : 0;
}

void main().then(
  () => process.exit(process.exitCode ?? 0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
