import { cpus } from 'node:os';
import type { Counts } from './stats.js';

/**
 * What the throttled simulation's servers carried in a window, read from the bench's counters:
 * per storage account and table the requests let through and refused (the table proxy's
 * `account.{a}.table.{t}.{kind|throttled}`), per OrderIndex partition the entities, and the
 * machine's CPU. Pure apart from `cpuSample`; test/bench/simulationLoad.test.ts.
 */
export interface AccountLoad {
  /** Requests per second let through. */
  requests: number;
  /** Requests per second refused (503/500). */
  throttled: number;
  /** Requests per second let through, per table (a batch by its target's table). */
  byTable: Record<string, number>;
  /** Requests per second refused, per table. */
  throttledByTable: Record<string, number>;
}

const accountKey = /^table\.account\.([^.]+)\.table\.([^.]*)\.(read|query|write|batch|throttled)$/;

export function accountLoads(before: Counts, after: Counts, seconds: number): Record<string, AccountLoad> {
  const out: Record<string, AccountLoad> = {};
  for (const [k, v] of Object.entries(after)) {
    const m = accountKey.exec(k);
    if (!m) continue;
    const rate = (v - (before[k] ?? 0)) / seconds;
    if (rate === 0) continue;
    const a = (out[m[1]] ??= { requests: 0, throttled: 0, byTable: {}, throttledByTable: {} });
    const table = m[2] || '?';
    if (m[3] === 'throttled') {
      a.throttled += rate;
      a.throttledByTable[table] = (a.throttledByTable[table] ?? 0) + rate;
    } else {
      a.requests += rate;
      a.byTable[table] = (a.byTable[table] ?? 0) + rate;
    }
  }
  return out;
}

/** Entities per second (read + written) through each OrderIndex partition, over every account. */
export function indexPartitionRates(before: Counts, after: Counts, seconds: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const m = /^table\.part\.OrderIndex\/([^.]*)\.(read|written)$/.exec(k);
    if (m) out[m[1]] = (out[m[1]] ?? 0) + (v - (before[k] ?? 0)) / seconds;
  }
  return out;
}

/**
 * Requests per order that runs on a clock in neither window: what the orders of a window spent
 * on an account beyond its rate at rest, per completed order.
 */
export function requestsPerOrder(
  window: AccountLoad,
  rest: AccountLoad | undefined,
  ordersPerSecond: number,
): number {
  return ordersPerSecond > 0 ? (window.requests - (rest?.requests ?? 0)) / ordersPerSecond : Number.NaN;
}

export interface CpuSample {
  busy: number;
  total: number;
}

/** The machine's CPU times summed over its cores (ms). */
export function cpuSample(): CpuSample {
  let busy = 0;
  let total = 0;
  for (const c of cpus()) {
    const t = c.times.user + c.times.nice + c.times.sys + c.times.irq;
    busy += t;
    total += t + c.times.idle;
  }
  return { busy, total };
}

/** The share of all cores busy between two samples (0-1), whoever used them. */
export function cpuBusyShare(from: CpuSample, to: CpuSample): number {
  const total = to.total - from.total;
  return total > 0 ? (to.busy - from.busy) / total : 0;
}

/** The `n` partitions (`{table}/{partition}`, every account pooled) with the most requests per second. */
export function busiestPartitions(
  before: Counts,
  after: Counts,
  seconds: number,
  n: number,
): Record<string, number> {
  const out: Array<[string, number]> = [];
  for (const [k, v] of Object.entries(after)) {
    const m = /^table\.part\.(.+)\.requests$/.exec(k);
    if (m) out.push([m[1], (v - (before[k] ?? 0)) / seconds]);
  }
  return Object.fromEntries(
    out
      .filter(([, v]) => v > 0)
      .sort((a, b) => b[1] - a[1])
      .slice(0, n),
  );
}

/**
 * Per completed order in a window: table answers by status (404/409/412: conflicts and
 * redone reads; refusals are 500/503) and Service Bus sends, deliveries and abandons
 * (an abandoned delivery is a failed execution, redelivered: work done again).
 */
export function perOrderCounts(before: Counts, after: Counts, orders: number): Record<string, number> {
  const out: Record<string, number> = {};
  if (!(orders > 0)) return out;
  for (const [k, v] of Object.entries(after)) {
    const m = /^(table\.status\.\d+|sb\.(sent|delivered|completed|abandoned|deadLettered))$/.exec(k);
    if (m) out[k.replace(/^table\./, '')] = (v - (before[k] ?? 0)) / orders;
  }
  return out;
}
