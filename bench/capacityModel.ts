import type { LimitKey, LimitTable } from './limits.js';
import { operations, serviceBusMonthly, type PriceTable } from './pricing.js';

/**
 * The capacity model: what one order does to each shared resource (measured at the servers by
 * the capacity bench), divided into Azure's published limits (bench/limits.json), gives each
 * resource's ceiling in orders per second at a deployment; the lowest binds. Pure, so every rule
 * is unit-tested (test/bench/capacityModel.test.ts); the bench does the measuring and the I/O.
 */

/** One table partition, per order: requests, entities read, entities written. */
export interface PartitionLoad {
  table: string;
  partition: string;
  requests: number;
  read: number;
  written: number;
}

/** One Service Bus entity, per order. Filter evaluations belong to topics. */
export interface EntityLoad {
  entity: string;
  sent: number;
  received: number;
  settled: number;
  filterEvaluations: number;
  /** AMQP transfer-frame bytes on the entity's links, client to broker and broker to client. */
  bytesIn?: number;
  bytesOut?: number;
}

/** What one order of a kind does, per order (means over the measured orders). */
export interface OrderLoad {
  kind: string;
  /** Partitions touched by more than one order in the measurement. */
  sharedPartitions: PartitionLoad[];
  /** Every table request the order made (one storage account today). */
  tableRequests: number;
  /** The same requests by table (a batch by its target's table). */
  tableRequestsByTable?: Record<string, number>;
  entities: EntityLoad[];
  /** AMQP transfer-frame bytes, client to broker (in) and broker to client (out). */
  bytesIn: number;
  bytesOut: number;
  executions: Record<string, number>;
  /** Median duration per execution, ms (measured on this machine). */
  executionMs: Record<string, number>;
}

export interface Deployment {
  serviceBusTier: 'Standard' | 'Premium';
  /** Premium only. */
  messagingUnits: number;
  /** Namespaces the orders are spread over by id (1 = what infra deploys). */
  serviceBusNamespaces: number;
  storageAccounts: number;
  indexPartitionsPerState: number;
  maxInstances: number;
  /** Concurrent executions per instance (host.json maxConcurrentCalls). */
  perInstanceConcurrency: number;
  instanceMemoryMB: number;
}

/** How the measured layout relates to the deployment's settings. */
export interface Layout {
  /** Tables whose partitions are spread per state by the index partition setting and by account. */
  spreadTables: readonly string[];
  /**
   * Tables spread by order id over a fixed number of partitions per account, whatever the
   * settings (InFlight: the id's first two hex digits, 256). A few orders touch some of them
   * twice by chance; the load divides over all of them.
   */
  fixedSpread?: Readonly<Record<string, number>>;
}

/** The family a partition's load is pooled in, or undefined when it is not spread. */
export function spreadFamily(layout: Layout, table: string, partition: string): string | undefined {
  if (layout.fixedSpread?.[table] !== undefined) return `${table}/*`;
  return layout.spreadTables.includes(table) ? `${table}/${familyOf(partition)}` : undefined;
}

/** A family groups the partitions one setting spreads a load over: the shard number is dropped. */
export const familyOf = (partition: string): string => partition.replace(/\d+/g, '#');

/** Entity operations a partition carries per order: a request that touches none counts one. */
export const partitionOperations = (p: PartitionLoad): number => Math.max(p.requests, p.read + p.written);

/** Weighted mean of per-order loads (weights need not sum to 1). */
export function mixLoads(loads: readonly OrderLoad[], weights: Record<string, number>): OrderLoad {
  const total = loads.reduce((s, l) => s + (weights[l.kind] ?? 0), 0);
  if (!(total > 0)) throw new RangeError('the mix gives no weight to any measured kind');
  const w = (l: OrderLoad) => (weights[l.kind] ?? 0) / total;
  const sumBy = <T>(
    items: (l: OrderLoad) => T[],
    key: (t: T) => string,
    add: (acc: T | undefined, t: T, f: number) => T,
  ) => {
    const out = new Map<string, T>();
    for (const l of loads) for (const t of items(l)) out.set(key(t), add(out.get(key(t)), t, w(l)));
    return [...out.values()];
  };
  const addRecord = (pick: (l: OrderLoad) => Record<string, number>) => {
    const out: Record<string, number> = {};
    for (const l of loads) for (const [k, v] of Object.entries(pick(l))) out[k] = (out[k] ?? 0) + v * w(l);
    return out;
  };
  const executions = addRecord((l) => l.executions);
  // Durations mix by executions, not by orders.
  const msWeighted = addRecord((l) =>
    Object.fromEntries(Object.entries(l.executionMs).map(([f, ms]) => [f, ms * (l.executions[f] ?? 0)])),
  );
  return {
    kind: Object.entries(weights)
      .filter(([, v]) => v > 0)
      .map(([k, v]) => `${k} ${+((v / total) * 100).toFixed(1)}%`)
      .join(', '),
    sharedPartitions: sumBy(
      (l) => l.sharedPartitions,
      (p) => `${p.table}/${p.partition}`,
      (acc, p, f) => ({
        table: p.table,
        partition: p.partition,
        requests: (acc?.requests ?? 0) + p.requests * f,
        read: (acc?.read ?? 0) + p.read * f,
        written: (acc?.written ?? 0) + p.written * f,
      }),
    ),
    tableRequests: loads.reduce((s, l) => s + l.tableRequests * w(l), 0),
    entities: sumBy(
      (l) => l.entities,
      (e) => e.entity,
      (acc, e, f) => ({
        entity: e.entity,
        sent: (acc?.sent ?? 0) + e.sent * f,
        received: (acc?.received ?? 0) + e.received * f,
        settled: (acc?.settled ?? 0) + e.settled * f,
        filterEvaluations: (acc?.filterEvaluations ?? 0) + e.filterEvaluations * f,
        bytesIn: (acc?.bytesIn ?? 0) + (e.bytesIn ?? 0) * f,
        bytesOut: (acc?.bytesOut ?? 0) + (e.bytesOut ?? 0) * f,
      }),
    ),
    bytesIn: loads.reduce((s, l) => s + l.bytesIn * w(l), 0),
    bytesOut: loads.reduce((s, l) => s + l.bytesOut * w(l), 0),
    executions,
    executionMs: Object.fromEntries(
      Object.entries(msWeighted).map(([f, v]) => [f, executions[f] > 0 ? v / executions[f] : 0]),
    ),
  };
}

/**
 * Load that runs on a clock, not per order: each instance's Supervisor sweep of every account,
 * the repair passes, call-budget lease renewals. Per second, on the busiest instance of each
 * resource; it grows with instances and schedules, not with orders, so it takes its share of a
 * limit before any order does. Measured at rest on the same deployment (bench/simulation.ts).
 */
export interface ClockLoad {
  /** Table requests per second on the busiest storage account. */
  accountRequestsPerSecond?: number;
  /** Entities per second on the busiest partition of a spread family (`OrderIndex/state:Pending:#`). */
  partitionEntitiesPerSecond?: Readonly<Record<string, number>>;
  /** Credits per second a Standard namespace spends. */
  namespaceCreditsPerSecond?: number;
}

/** One line of the capacity table. */
export interface Ceiling {
  resource: string;
  /** Per-order load on one instance of the resource at this deployment, in `unit`. */
  perOrder: number;
  unit: string;
  /** The limit it is divided into, per second, and where that figure comes from. */
  limit: number | null;
  source: LimitKey | 'measured' | null;
  /** Orders per second the resource carries at this deployment; null when nothing limits it. */
  ordersPerSecond: number | null;
  /** Per second of the limit spent on a clock before any order (ClockLoad). */
  clockLoad?: number;
  note?: string;
}

/** What is left of a limit after the clock-driven load, divided by the load per order. */
const ceilingOf = (limit: number, perOrder: number, clock = 0): number | null =>
  perOrder > 0 ? Math.max(0, limit - clock) / perOrder : null;

/** `clockLoad` on a ceiling only when there is some. */
const clocked = (clock: number | undefined) => (clock ? { clockLoad: clock } : {});

/** Credits a Standard namespace spends per order: sends, receives, filter evaluations. */
export const standardCredits = (e: EntityLoad): number => e.sent + e.received + e.filterEvaluations;

/** Each resource's ceiling at a deployment. */
export function ceilings(
  load: OrderLoad,
  d: Deployment,
  limits: LimitTable,
  layout: Layout,
  clock: ClockLoad = {},
): Ceiling[] {
  const out: Ceiling[] = [];
  const partitionLimit = limits.value('tablePartitionEntitiesPerSecond');
  // Spread tables: the family's load divides over partitions per state and over accounts.
  const families = new Map<string, { ops: number; names: Set<string> }>();
  for (const p of load.sharedPartitions) {
    if (!layout.spreadTables.includes(p.table)) continue;
    const key = `${p.table}/${familyOf(p.partition)}`;
    const f = families.get(key) ?? { ops: 0, names: new Set<string>() };
    f.ops += partitionOperations(p);
    f.names.add(p.partition);
    families.set(key, f);
  }
  const spread = d.indexPartitionsPerState * d.storageAccounts;
  // A kind the mix gives no weight leaves partitions with no load: they limit nothing.
  for (const [key, f] of [...families].filter(([, f]) => f.ops > 0).sort((a, b) => b[1].ops - a[1].ops)) {
    const perPartition = f.ops / spread;
    const onClock = clock.partitionEntitiesPerSecond?.[key];
    out.push({
      resource: `table partition ${key}${spread > 1 ? ` (each of ${spread})` : ''}`,
      perOrder: perPartition,
      unit: 'entities',
      limit: partitionLimit,
      source: 'tablePartitionEntitiesPerSecond',
      ordersPerSecond: ceilingOf(partitionLimit, perPartition, onClock),
      ...clocked(onClock),
      note: `measured over ${f.names.size} partition name(s); spread assumed uniform by order id`,
    });
  }
  const fixed = new Map<string, number>();
  for (const p of load.sharedPartitions) {
    if (layout.fixedSpread?.[p.table] === undefined) continue;
    fixed.set(p.table, (fixed.get(p.table) ?? 0) + partitionOperations(p));
  }
  for (const [table, ops] of fixed) {
    const n = (layout.fixedSpread?.[table] ?? 1) * d.storageAccounts;
    out.push({
      resource: `table partition ${table}/* (each of ${n})`,
      perOrder: ops / n,
      unit: 'entities',
      limit: partitionLimit,
      source: 'tablePartitionEntitiesPerSecond',
      ordersPerSecond: ceilingOf(partitionLimit, ops / n),
      note: 'spread by order id over a fixed count; the measured partitions pooled',
    });
  }
  for (const p of load.sharedPartitions) {
    if (layout.spreadTables.includes(p.table) || layout.fixedSpread?.[p.table] !== undefined) continue;
    const ops = partitionOperations(p);
    if (ops <= 0) continue;
    out.push({
      resource: `table partition ${p.table}/${p.partition}`,
      perOrder: ops,
      unit: 'entities',
      limit: partitionLimit,
      source: 'tablePartitionEntitiesPerSecond',
      ordersPerSecond: ceilingOf(partitionLimit, ops),
    });
  }
  const accountLimit = limits.value('storageAccountRequestsPerSecond');
  const perAccount = load.tableRequests / d.storageAccounts;
  out.push({
    resource: `storage account${d.storageAccounts > 1 ? ` (each of ${d.storageAccounts})` : ''}`,
    perOrder: perAccount,
    unit: 'requests',
    limit: accountLimit,
    source: 'storageAccountRequestsPerSecond',
    ordersPerSecond: ceilingOf(accountLimit, perAccount, clock.accountRequestsPerSecond),
    ...clocked(clock.accountRequestsPerSecond),
    note: "the Functions host's own storage (AzureWebJobsStorage) is not counted",
  });
  const ns = d.serviceBusNamespaces;
  const nsName = `Service Bus namespace${ns > 1 ? ` (each of ${ns})` : ''}`;
  if (d.serviceBusTier === 'Standard') {
    const credits = load.entities.reduce((s, e) => s + standardCredits(e), 0) / ns;
    const limit = limits.value('serviceBusStandardCreditsPerSecond');
    out.push({
      resource: `${nsName}, Standard credits`,
      perOrder: credits,
      unit: 'credits',
      limit,
      source: 'serviceBusStandardCreditsPerSecond',
      ordersPerSecond: ceilingOf(limit, credits, clock.namespaceCreditsPerSecond),
      ...clocked(clock.namespaceCreditsPerSecond),
      note: 'sends + receives + filter evaluations',
    });
  } else {
    const perMu = limits.value('serviceBusPremiumBytesPerSecondPerMessagingUnit');
    const maxMu = limits.value('serviceBusPremiumMessagingUnits');
    if (d.messagingUnits > maxMu) throw new RangeError(`a namespace holds at most ${maxMu} messaging units`);
    const bytes = Math.max(load.bytesIn, load.bytesOut) / ns;
    const limit = perMu * d.messagingUnits;
    out.push({
      resource: `${nsName}, Premium ${d.messagingUnits} MU`,
      perOrder: bytes,
      unit: 'bytes (busier direction)',
      limit,
      source: 'serviceBusPremiumBytesPerSecondPerMessagingUnit',
      ordersPerSecond: ceilingOf(limit, bytes),
      note: "Microsoft's benchmark observation (4 MB/s per MU), not a limit",
    });
  }
  for (const e of [...load.entities]
    .filter((x) => standardCredits(x) > 0)
    .sort((a, b) => standardCredits(b) - standardCredits(a))) {
    out.push({
      resource: `  entity ${e.entity}`,
      perOrder: standardCredits(e) / ns,
      unit: 'credits',
      limit: null,
      source: null,
      ordersPerSecond: null,
      note: `in ${+e.sent.toFixed(2)} out ${+e.received.toFixed(2)} settled ${+e.settled.toFixed(2)} filters ${+e.filterEvaluations.toFixed(2)} bytes ${Math.round(e.bytesIn ?? 0)}/${Math.round(e.bytesOut ?? 0)} (counted in the namespace)`,
    });
  }
  // Functions: instance-seconds per order over the instances the app may run.
  const quota = limits.value('flexRegionalMemoryQuotaMB') / d.instanceMemoryMB;
  const appMax = limits.value('flexMaximumInstanceCountMax');
  if (d.maxInstances > appMax) throw new RangeError(`maximumInstanceCount is at most ${appMax}`);
  const instances = Math.min(d.maxInstances, quota);
  const instanceSeconds = Object.entries(load.executions).reduce(
    (s, [f, n]) => s + (n * (load.executionMs[f] ?? 0)) / 1000 / d.perInstanceConcurrency,
    0,
  );
  out.push({
    resource: `function instances (max ${d.maxInstances}, ${d.perInstanceConcurrency} concurrent each)`,
    perOrder: instanceSeconds,
    unit: 'instance-seconds',
    limit: instances,
    source:
      d.maxInstances > limits.value('flexMaximumInstanceCountDefault')
        ? 'flexMaximumInstanceCountMax'
        : 'flexMaximumInstanceCountDefault',
    ordersPerSecond: ceilingOf(instances, instanceSeconds),
    note: 'durations measured here with instant remote services; in Azure each Agent also waits for its service',
  });
  return out;
}

/** The lowest ceiling: what binds first. */
export function binding(cs: readonly Ceiling[]): Ceiling {
  const limited = cs.filter((c) => c.ordersPerSecond !== null);
  if (limited.length === 0) throw new Error('no resource limits the app');
  return limited.reduce((a, b) => ((b.ordersPerSecond as number) < (a.ordersPerSecond as number) ? b : a));
}

export interface MonthlyCost {
  ordersPerMonth: number;
  serviceBus: number;
  table: number;
  executions: number;
  compute: number;
  total: number;
  /** What the deployment costs with no orders (Service Bus base or messaging units). */
  fixed: number;
  perMillionOrders: number;
}

/**
 * A month of a deployment carrying `ordersPerMonth`. Compute is the busy end (executions overlap
 * on instances: billed time ~ execution time), Service Bus Standard at its tiered operation
 * prices, table transactions at the list price; capacity (GB-month) is left out.
 */
export function monthlyCost(
  load: OrderLoad,
  d: Deployment,
  ordersPerMonth: number,
  prices: PriceTable,
): MonthlyCost {
  const hours = prices.hoursPerMonth;
  let serviceBus: number;
  let fixed: number;
  if (d.serviceBusTier === 'Standard') {
    const ops = load.entities.reduce(
      (s, e) => s + operations({ sends: e.sent, receives: e.received, settlements: e.settled }),
      0,
    );
    const perNamespace = (ops * ordersPerMonth) / d.serviceBusNamespaces;
    serviceBus = serviceBusMonthly(perNamespace, prices) * d.serviceBusNamespaces;
    fixed = serviceBusMonthly(0, prices) * d.serviceBusNamespaces;
  } else {
    const mu = prices.serviceBusPremium?.perMessagingUnitHour.value;
    if (mu === undefined)
      throw new Error('price table: serviceBusPremium.perMessagingUnitHour is needed for Premium');
    serviceBus = mu * hours * d.messagingUnits * d.serviceBusNamespaces;
    fixed = serviceBus;
  }
  const table = (load.tableRequests * ordersPerMonth * prices.tableStorage.per10kTransactions.value) / 1e4;
  const flex = prices.flexConsumption.onDemand;
  const execs = Object.values(load.executions).reduce((a, b) => a + b, 0);
  const executions = ((execs * ordersPerMonth) / 1e6) * flex.perMillionExecutions.value;
  const execMs = Object.entries(load.executions).reduce((s, [f, n]) => s + n * (load.executionMs[f] ?? 0), 0);
  const compute = (execMs / 1000) * (d.instanceMemoryMB / 1024) * ordersPerMonth * flex.perGBSecond.value;
  const total = serviceBus + table + executions + compute;
  return {
    ordersPerMonth,
    serviceBus,
    table,
    executions,
    compute,
    total,
    fixed,
    perMillionOrders: ordersPerMonth > 0 ? (total / ordersPerMonth) * 1e6 : Number.NaN,
  };
}

/** Orders in a month whose average rate is `averageShare` of the peak. */
export const ordersPerMonth = (peakPerSecond: number, averageShare: number, prices: PriceTable): number =>
  peakPerSecond * averageShare * 3600 * prices.hoursPerMonth;

export interface Plan {
  target: number;
  deployment: Deployment;
  ceilings: Ceiling[];
  binding: Ceiling;
  cost: MonthlyCost;
}

export interface PlanOptions {
  /** Use at most this share of every limit (0.5: every resource stays under half its limit). */
  share: number;
  averageShare: number;
  base: Deployment;
  choices: {
    messagingUnits: readonly number[];
    serviceBusNamespaces: readonly number[];
    storageAccounts: readonly number[];
    indexPartitionsPerState: readonly number[];
    maxInstances: readonly number[];
  };
}

/**
 * The cheapest deployment whose every ceiling, at `share` of its limit, carries `target` orders
 * per second; ties go to the fewest partitions, accounts and instances. Null when none does.
 */
export function planFor(
  target: number,
  load: OrderLoad,
  limits: LimitTable,
  layout: Layout,
  prices: PriceTable,
  o: PlanOptions,
): Plan | null {
  let best: Plan | null = null;
  const tiers: Array<{ tier: Deployment['serviceBusTier']; mu: number }> = [
    { tier: 'Standard', mu: 0 },
    ...o.choices.messagingUnits.map((mu) => ({ tier: 'Premium' as const, mu })),
  ];
  const size = (d: Deployment) =>
    d.indexPartitionsPerState + d.storageAccounts + d.maxInstances / 100 + d.serviceBusNamespaces;
  for (const { tier, mu } of tiers)
    for (const namespaces of o.choices.serviceBusNamespaces)
      for (const accounts of o.choices.storageAccounts)
        for (const partitions of o.choices.indexPartitionsPerState)
          for (const maxInstances of o.choices.maxInstances) {
            const d: Deployment = {
              ...o.base,
              serviceBusTier: tier,
              messagingUnits: mu,
              serviceBusNamespaces: namespaces,
              storageAccounts: accounts,
              indexPartitionsPerState: partitions,
              maxInstances,
            };
            const cs = ceilings(load, d, limits, layout);
            const b = binding(cs);
            if ((b.ordersPerSecond as number) * o.share < target) continue;
            const cost = monthlyCost(load, d, ordersPerMonth(target, o.averageShare, prices), prices);
            const better =
              !best ||
              cost.total < best.cost.total - 1e-6 ||
              (Math.abs(cost.total - best.cost.total) <= 1e-6 && size(d) < size(best.deployment));
            if (better) best = { target, deployment: d, ceilings: cs, binding: b, cost };
          }
  return best;
}
