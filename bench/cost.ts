import { type BenchStack, type OrderItem, sleep, submitOrder } from './benchStack.js';
import { diffCounts, type Counts, type OrderCost, perHour } from './stats.js';

/**
 * Part 1: what one order costs, counted at the servers (the counting proxies and the emulator's
 * per-entity counters) while the real app runs in the real host. Orders run one at a time; the
 * Supervisor keeps sweeping in the background, and its empty index queries (one per run) are
 * idle cost, reported apart and left out of the per-order figures.
 */
export const scenarios: Record<
  'success' | 'retried' | 'compensated',
  { items: OrderItem[]; expect: string; what: string }
> = {
  success: {
    items: [{ sku: 'SKU-1', quantity: 1, unitPrice: 9.99 }],
    expect: 'Processed',
    what: 'three steps succeed',
  },
  retried: {
    items: [{ sku: 'FAULT:inventory:hang:1', quantity: 1, unitPrice: 9.99 }],
    expect: 'Processed',
    what: 'inventory hangs past complete-by once; the Supervisor retries',
  },
  compensated: {
    items: [{ sku: 'FAULT:payment:permanent', quantity: 1, unitPrice: 9.99 }],
    expect: 'Compensated',
    what: 'payment fails permanently; inventory is compensated',
  },
};

export type ScenarioName = keyof typeof scenarios;

/** Counter deltas to billable units. Sweep queries (InFlight table) are excluded and returned apart. */
export function toOrderCost(d: Counts): { cost: OrderCost; sweepQueries: number } {
  const sweepQueries = d['table.InFlight.query'] ?? 0;
  const reads = d['table.read'] ?? 0;
  const queries = (d['table.query'] ?? 0) - sweepQueries;
  const writes = d['table.write'] ?? 0;
  const batches = d['table.batch'] ?? 0;
  return {
    cost: {
      table: { reads, queries, writes, batches, total: reads + queries + writes + batches },
      serviceBus: {
        sends: d['sb.sent'] ?? 0,
        receives: d['sb.delivered'] ?? 0,
        settlements: (d['sb.completed'] ?? 0) + (d['sb.abandoned'] ?? 0) + (d['sb.deadLettered'] ?? 0),
      },
    },
    sweepQueries,
  };
}

export interface ScenarioResult {
  scenario: ScenarioName;
  runs: number;
  /** Mean over runs. */
  cost: OrderCost;
  /** Per-run totals (table transactions, sends), to show the figure is stable. */
  perRun: Array<{ table: number; sends: number; state: string; ms: number }>;
  /** Table requests by table and kind, summed over runs, divided by runs. */
  detail: Counts;
  /** Entities written and read per table partition (tableProxy), summed over runs. */
  partitions: Counts;
  sweepQueriesInWindow: number;
}

function mean(costs: OrderCost[]): OrderCost {
  const n = costs.length;
  const avg = (f: (c: OrderCost) => number) => costs.reduce((s, c) => s + f(c), 0) / n;
  return {
    table: {
      reads: avg((c) => c.table.reads),
      queries: avg((c) => c.table.queries),
      writes: avg((c) => c.table.writes),
      batches: avg((c) => c.table.batches),
      total: avg((c) => c.table.total),
    },
    serviceBus: {
      sends: avg((c) => c.serviceBus.sends),
      receives: avg((c) => c.serviceBus.receives),
      settlements: avg((c) => c.serviceBus.settlements),
    },
  };
}

/** Waits until no app counter but the sweep query moves for `quietMs`. */
export async function settle(bench: BenchStack, quietMs = 1500, maxMs = 20_000): Promise<void> {
  const key = (c: Counts) =>
    JSON.stringify(
      Object.entries(c).filter(
        ([k]) =>
          !k.startsWith('amqp.') &&
          !k.startsWith('table.part.') &&
          !k.startsWith('table.op.') &&
          !k.startsWith('table.account.') &&
          !k.startsWith('feed.') &&
          !k.includes('InFlight.query') &&
          k !== 'table.query' &&
          k !== 'table.transactions' &&
          !k.startsWith('table.status.200'),
      ),
    );
  const deadline = Date.now() + maxMs;
  let last = key(bench.counters());
  let since = Date.now();
  while (Date.now() < deadline) {
    await sleep(250);
    const now = key(bench.counters());
    if (now !== last) {
      last = now;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) return;
  }
}

export async function measureScenario(
  bench: BenchStack,
  name: ScenarioName,
  runs: number,
): Promise<ScenarioResult> {
  const s = scenarios[name];
  const costs: OrderCost[] = [];
  const perRun: ScenarioResult['perRun'] = [];
  let detail: Counts = {};
  const partitions: Counts = {};
  let sweeps = 0;
  for (let i = 0; i < runs; i++) {
    await settle(bench);
    const before = bench.counters();
    const { orderId, sentAt } = await submitOrder(bench.stack, s.items);
    const done = await bench.status.waitFor(orderId, 120_000);
    if (done.state !== s.expect)
      throw new Error(`${name}: order ${orderId} ended ${done.state}, expected ${s.expect}`);
    await settle(bench);
    const d = diffCounts(bench.counters(), before);
    const { cost, sweepQueries } = toOrderCost(d);
    costs.push(cost);
    sweeps += sweepQueries;
    perRun.push({
      table: cost.table.total,
      sends: cost.serviceBus.sends,
      state: done.state,
      ms: done.at - sentAt,
    });
    for (const [k, v] of Object.entries(d)) {
      if (k.startsWith('table.partition.')) partitions[k] = (partitions[k] ?? 0) + v;
      if (
        /^table\.(Orders|InFlight)\.(read|query|write)$/.test(k) ||
        k === 'table.batch' ||
        k === 'table.batchOperations' ||
        k.startsWith('sb.sent.') ||
        k === 'sb.duplicates' ||
        /^table\.status\.(404|409|412)$/.test(k)
      )
        detail[k] = (detail[k] ?? 0) + v;
    }
  }
  detail = Object.fromEntries(Object.entries(detail).map(([k, v]) => [k, v / runs]));
  if (detail['table.InFlight.query'] !== undefined) delete detail['table.InFlight.query'];
  return {
    scenario: name,
    runs,
    cost: mean(costs),
    perRun,
    detail,
    partitions,
    sweepQueriesInWindow: sweeps,
  };
}

/**
 * Submission alone: the window closes when the 202 arrives. The Scheduler may already be loading
 * the order by then, so the minimum over runs is the figure (submission never does less).
 */
export async function measureSubmission(bench: BenchStack, runs: number): Promise<OrderCost> {
  let best: OrderCost | undefined;
  for (let i = 0; i < runs; i++) {
    await settle(bench);
    const before = bench.counters();
    const { orderId } = await submitOrder(bench.stack);
    const { cost } = toOrderCost(diffCounts(bench.counters(), before));
    // Only what the submitOrder function does: the index write, the batch and the process-order send.
    const sub: OrderCost = {
      table: { ...cost.table, reads: 0, queries: 0, total: cost.table.writes + cost.table.batches },
      serviceBus: { sends: cost.serviceBus.sends, receives: 0, settlements: 0 },
    };
    if (!best || sub.table.total + sub.serviceBus.sends < best.table.total + best.serviceBus.sends)
      best = sub;
    await bench.status.waitFor(orderId, 60_000);
  }
  return best!;
}

export interface IdleResult {
  windowMs: number;
  sweepRuns: number;
  tableTransactions: number;
  tablePerSweep: number;
  serviceBusMessageOps: number;
  amqpFrames: Counts;
  perHour: {
    benchSchedule: { sweeps: number; tableTransactions: number };
    configuredSchedule: { schedule: string; sweeps: number; tableTransactions: number };
    amqpFramesOut: number;
    amqpFramesIn: number;
  };
}

export async function measureIdle(
  bench: BenchStack,
  windowMs: number,
  benchSweepsPerHour: number,
  configured: { schedule: string; sweepsPerHour: number },
): Promise<IdleResult> {
  await settle(bench);
  const before = bench.counters();
  const t0 = performance.now();
  await sleep(windowMs);
  const elapsed = performance.now() - t0;
  const d = diffCounts(bench.counters(), before);
  const sweepRuns = d['table.InFlight.query'] ?? 0;
  const tableTransactions = d['table.transactions'] ?? 0;
  const tablePerSweep = sweepRuns > 0 ? tableTransactions / sweepRuns : 0;
  const amqpFrames: Counts = {};
  for (const [k, v] of Object.entries(d)) if (k.startsWith('amqp.')) amqpFrames[k.slice(5)] = v;
  const sum = (prefix: string) =>
    Object.entries(amqpFrames)
      .filter(([k]) => k.startsWith(prefix))
      .reduce((s, [, v]) => s + v, 0);
  return {
    windowMs: elapsed,
    sweepRuns,
    tableTransactions,
    tablePerSweep,
    serviceBusMessageOps: (d['sb.sent'] ?? 0) + (d['sb.delivered'] ?? 0) + (d['sb.completed'] ?? 0),
    amqpFrames,
    perHour: {
      benchSchedule: { sweeps: benchSweepsPerHour, tableTransactions: benchSweepsPerHour * tablePerSweep },
      configuredSchedule: {
        schedule: configured.schedule,
        sweeps: configured.sweepsPerHour,
        tableTransactions: configured.sweepsPerHour * tablePerSweep,
      },
      amqpFramesOut: perHour(sum('out.'), elapsed),
      amqpFramesIn: perHour(sum('in.'), elapsed),
    },
  };
}
