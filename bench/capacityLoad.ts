import { type BenchStack, sleep, submitOrder } from './benchStack.js';
import {
  spreadFamily,
  type EntityLoad,
  type Layout,
  type OrderLoad,
  type PartitionLoad,
} from './capacityModel.js';
import { scenarios, settle, type ScenarioName } from './cost.js';
import type { Invocation } from './invocations.js';
import { diffCounts, percentile, type Counts } from './stats.js';

/**
 * Measures what each kind of order does to every shared resource, at the servers: the table
 * proxy's per-partition counters, the emulator's per-entity counters and the AMQP proxy's
 * transfer bytes, one order at a time so that each window holds one order. Background work that
 * runs on a clock (the Supervisor's sweep) is measured in an idle window and subtracted.
 */

/** One order's window: counter deltas with the idle rate taken out, and its invocations. */
export interface OrderWindow {
  kind: ScenarioName;
  orderId: string;
  seconds: number;
  counts: Counts;
  invocations: Invocation[];
}

/** Per-second background rates, from a window with no orders. */
export async function idleRates(bench: BenchStack, windowMs: number): Promise<Counts> {
  await settle(bench);
  const before = bench.counters();
  const t0 = performance.now();
  await sleep(windowMs);
  const seconds = (performance.now() - t0) / 1000;
  const d = diffCounts(bench.counters(), before);
  return Object.fromEntries(Object.entries(d).map(([k, v]) => [k, v / seconds]));
}

/** Counter deltas less what the background did in as many seconds (never below zero). */
export function withoutBackground(d: Counts, rates: Counts, seconds: number): Counts {
  const out: Counts = {};
  for (const [k, v] of Object.entries(d)) {
    const net = v - (rates[k] ?? 0) * seconds;
    if (net > 1e-9) out[k] = net;
  }
  return out;
}

export async function measureOrders(
  bench: BenchStack,
  kind: ScenarioName,
  runs: number,
  rates: Counts,
  invocationsIn: (from: number, to: number) => Invocation[],
): Promise<OrderWindow[]> {
  const s = scenarios[kind];
  const out: OrderWindow[] = [];
  for (let i = 0; i < runs; i++) {
    await settle(bench);
    // The order before may still be finishing its last invocation.
    await sleep(300);
    const before = bench.counters();
    const from = Date.now();
    const t0 = performance.now();
    const { orderId } = await submitOrder(bench.stack, s.items);
    const done = await bench.status.waitFor(orderId, 120_000);
    if (done.state !== s.expect)
      throw new Error(`${kind}: order ${orderId} ended ${done.state}, expected ${s.expect}`);
    await settle(bench);
    await sleep(300); // the host's last lines are still in the pipe
    const seconds = (performance.now() - t0) / 1000;
    const counts = withoutBackground(diffCounts(bench.counters(), before), rates, seconds);
    out.push({ kind, orderId, seconds, counts, invocations: invocationsIn(from, Date.now()) });
  }
  return out;
}

const partKey = /^table\.part\.(.+)\/([^/]*)\.(requests|read|written)$/;

/**
 * Partitions a window touched (at least one request after the background is taken out). A query
 * that names no partition (`(scan)`) is not a partition: the only ones are the Supervisor's, on a
 * clock, and what is left of them after the idle rate comes off is noise, not per-order load.
 */
export function partitionsTouched(w: Pick<OrderWindow, 'counts'>): Set<string> {
  const out = new Set<string>();
  for (const [k, v] of Object.entries(w.counts)) {
    const m = partKey.exec(k);
    if (m && m[3] === 'requests' && m[2] !== '(scan)' && v >= 0.5) out.add(`${m[1]}/${m[2]}`);
  }
  return out;
}

/**
 * Partitions touched by more than one order: the shared ones. In a spread table a partition is
 * shared when its family is (`state:Pending:#`): with 32 partitions per state a few orders touch
 * each one once, yet every order goes through one of them.
 */
export function sharedPartitions(
  windows: readonly Pick<OrderWindow, 'counts'>[],
  layout: Layout = { spreadTables: [] },
): Set<string> {
  const seen = new Map<string, number>();
  const families = new Map<string, number>();
  const familyKey = (p: string) => {
    const slash = p.indexOf('/');
    return spreadFamily(layout, p.slice(0, slash), p.slice(slash + 1));
  };
  for (const w of windows) {
    const touched = partitionsTouched(w);
    for (const p of touched) seen.set(p, (seen.get(p) ?? 0) + 1);
    for (const f of new Set([...touched].map(familyKey).filter((f) => f !== undefined)))
      families.set(f, (families.get(f) ?? 0) + 1);
  }
  return new Set(
    [...seen].filter(([p, n]) => n > 1 || (families.get(familyKey(p) ?? '') ?? 0) > 1).map(([p]) => p),
  );
}

/** Topic name -> filter evaluations per message sent to it (rules over all its subscriptions). */
export type TopicRules = Record<string, number>;

/**
 * Per-order load of one kind: means over its windows. `feedEntity` is the bench's own reader
 * (a client, not the app); its receives are left out, its topic's filter evaluations are not.
 */
export function orderLoad(
  kind: string,
  windows: readonly OrderWindow[],
  shared: ReadonlySet<string>,
  topicRules: TopicRules,
): OrderLoad {
  const n = windows.length;
  if (n === 0) throw new RangeError(`no orders of kind ${kind}`);
  const sum: Counts = {};
  for (const w of windows) for (const [k, v] of Object.entries(w.counts)) sum[k] = (sum[k] ?? 0) + v;
  const mean = (k: string) => (sum[k] ?? 0) / n;
  const partitions = new Map<string, PartitionLoad>();
  for (const k of Object.keys(sum)) {
    const m = partKey.exec(k);
    if (!m || !shared.has(`${m[1]}/${m[2]}`)) continue;
    const id = `${m[1]}/${m[2]}`;
    const p = partitions.get(id) ?? { table: m[1], partition: m[2], requests: 0, read: 0, written: 0 };
    p[m[3] as 'requests' | 'read' | 'written'] = mean(k);
    partitions.set(id, p);
  }
  const entities = new Map<string, EntityLoad>();
  const entity = (name: string) => {
    const e = entities.get(name) ?? {
      entity: name,
      sent: 0,
      received: 0,
      settled: 0,
      filterEvaluations: 0,
      bytesIn: 0,
      bytesOut: 0,
    };
    entities.set(name, e);
    return e;
  };
  for (const k of Object.keys(sum)) {
    let m: RegExpExecArray | null;
    if ((m = /^sb\.sent\.(.+)$/.exec(k))) {
      const e = entity(m[1]);
      e.sent = mean(k);
      e.filterEvaluations = mean(k) * (topicRules[m[1].toLowerCase()] ?? 0);
    } else if ((m = /^sb\.delivered\.(.+)$/.exec(k))) entity(m[1]).received = mean(k);
    else if ((m = /^sb\.settled\.(.+)$/.exec(k))) entity(m[1]).settled = mean(k);
    // Bytes by link address: the bench's own reader is not behind the proxy, so its links are absent.
    else if ((m = /^amqp\.out\.bytes\.(.+)$/.exec(k))) entity(m[1]).bytesIn = mean(k);
    else if ((m = /^amqp\.in\.bytes\.(.+)$/.exec(k))) entity(m[1]).bytesOut = mean(k);
  }
  const executions: Record<string, number> = {};
  const durations: Record<string, number[]> = {};
  for (const w of windows)
    for (const i of w.invocations) {
      if (i.fn === 'supervisor') continue; // on a clock, not per order
      executions[i.fn] = (executions[i.fn] ?? 0) + 1 / n;
      (durations[i.fn] ??= []).push(i.durationMs);
    }
  return {
    kind,
    sharedPartitions: [...partitions.values()].sort(
      (a, b) => a.table.localeCompare(b.table) || a.partition.localeCompare(b.partition),
    ),
    tableRequests: mean('table.transactions'),
    tableRequestsByTable: byTable(sum, n),
    entities: [...entities.values()].sort((a, b) => a.entity.localeCompare(b.entity)),
    bytesIn: mean('amqp.out.transferBytes'),
    bytesOut: mean('amqp.in.transferBytes'),
    executions,
    executionMs: Object.fromEntries(Object.entries(durations).map(([f, ds]) => [f, percentile(ds, 50)])),
  };
}

/** Requests per order by table, from the proxy's `account.{a}.table.{t}.{kind}` (refusals left out). */
function byTable(sum: Counts, n: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(sum)) {
    const m = /^table\.account\.[^.]+\.table\.([^.]*)\.(read|query|write|batch)$/.exec(k);
    if (m) out[m[1] || '?'] = (out[m[1] || '?'] ?? 0) + v / n;
  }
  return out;
}
