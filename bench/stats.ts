/**
 * Pure helpers for the benchmarks: percentiles, counter arithmetic and the per-step budget.
 * No I/O here, so they are unit-tested (test/bench/stats.test.ts).
 */

/** Nearest-rank percentile (p in 0..100) of unsorted samples; NaN for no samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile ${p} is outside 0..100`);
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1];
}

export interface LatencySummary {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

export function summarize(samples: readonly number[]): LatencySummary {
  return {
    count: samples.length,
    p50: percentile(samples, 50),
    p95: percentile(samples, 95),
    p99: percentile(samples, 99),
    max: samples.length === 0 ? Number.NaN : Math.max(...samples),
  };
}

export type Counts = Record<string, number>;

/** after - before, key by key; keys missing on one side count as 0; zero entries are dropped. */
export function diffCounts(after: Counts, before: Counts): Counts {
  const out: Counts = {};
  for (const key of new Set([...Object.keys(after), ...Object.keys(before)])) {
    const d = (after[key] ?? 0) - (before[key] ?? 0);
    if (d !== 0) out[key] = d;
  }
  return out;
}

export function addCounts(a: Counts, b: Counts): Counts {
  const out: Counts = { ...a };
  for (const [key, value] of Object.entries(b)) out[key] = (out[key] ?? 0) + value;
  return out;
}

/** Every value divided by n (e.g. a total over n orders to a per-order figure). */
export function scaleCounts(counts: Counts, divisor: number): Counts {
  if (!(divisor > 0)) throw new RangeError('divisor must be positive');
  return Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, v / divisor]));
}

/** What one order cost, in billable units. */
export interface OrderCost {
  /** Table transactions: every HTTP request to the table service ($batch = 1). */
  table: { reads: number; queries: number; writes: number; batches: number; total: number };
  serviceBus: { sends: number; receives: number; settlements: number };
}

/** Per-step figures beyond submission, against the budget (2 table transactions, 2 sends). */
export interface BudgetCheck {
  steps: number;
  tablePerStep: number;
  sendsPerStep: number;
  tableBudget: number;
  sendsBudget: number;
  tableWithin: boolean;
  sendsWithin: boolean;
}

export const perStepBudget = { tableTransactions: 2, serviceBusSends: 2 } as const;

export function checkBudget(order: OrderCost, submission: OrderCost, steps: number): BudgetCheck {
  if (!(steps > 0)) throw new RangeError('steps must be positive');
  const tablePerStep = (order.table.total - submission.table.total) / steps;
  const sendsPerStep = (order.serviceBus.sends - submission.serviceBus.sends) / steps;
  return {
    steps,
    tablePerStep,
    sendsPerStep,
    tableBudget: perStepBudget.tableTransactions,
    sendsBudget: perStepBudget.serviceBusSends,
    tableWithin: tablePerStep <= perStepBudget.tableTransactions,
    sendsWithin: sendsPerStep <= perStepBudget.serviceBusSends,
  };
}

/** Idle work over a window, extrapolated to an hour. */
export function perHour(count: number, windowMs: number): number {
  if (!(windowMs > 0)) throw new RangeError('windowMs must be positive');
  return (count * 3_600_000) / windowMs;
}

/** Throughput: completed items per second over a wall-clock span. */
export function ratePerSecond(completed: number, elapsedMs: number): number {
  if (!(elapsedMs > 0)) throw new RangeError('elapsedMs must be positive');
  return (completed * 1000) / elapsedMs;
}

/** Fixed-width text table; numbers are rounded to `digits` places. */
export function formatTable(
  header: readonly string[],
  rows: ReadonlyArray<ReadonlyArray<unknown>>,
  digits = 1,
): string {
  const cell = (v: unknown): string =>
    typeof v === 'number'
      ? Number.isFinite(v)
        ? Number.isInteger(v)
          ? String(v)
          : v.toFixed(digits)
        : '-'
      : String(v ?? '');
  const text = [header.map(String), ...rows.map((r) => r.map(cell))];
  const widths = header.map((_, i) => Math.max(...text.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) =>
    r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(text[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...text.slice(1).map(line)].join('\n');
}
