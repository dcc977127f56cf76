import { billedActivityMs, billedMs, type Durations, type Interval, type PriceTable } from './pricing.js';
import { percentile } from './stats.js';

/**
 * Invocations as the functions host reports them: its "Executed 'Functions.<name>' (..., Duration=Nms)"
 * line, stamped with the time it finished. The bench reads them from the host's output; nothing
 * in the app or the host changes for it.
 */
export interface Invocation {
  fn: string;
  ok: boolean;
  /** Epoch ms the invocation ended (the line's timestamp). */
  end: number;
  durationMs: number;
}

const executed =
  /(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) .*?Executed 'Functions\.([^']+)' \((Succeeded|Failed), Id=[^,]+, Duration=(\d+)ms\)/;

export function parseInvocation(line: string): Invocation | undefined {
  const m = executed.exec(line);
  if (!m) return undefined;
  const end = Date.parse(m[1]);
  if (Number.isNaN(end)) return undefined;
  return { fn: m[2], ok: m[3] === 'Succeeded', end, durationMs: Number(m[4]) };
}

export const interval = (i: Invocation): Interval => [i.end - i.durationMs, i.end];

/** Invocations that ended inside [from, to] (epoch ms). */
export function within(all: readonly Invocation[], from: number, to: number): Invocation[] {
  return all.filter((i) => i.end >= from && i.end <= to);
}

/** Executions per function, divided by the number of orders the window carried. */
export function executionsPer(invocations: readonly Invocation[], orders: number): Record<string, number> {
  if (!(orders > 0)) throw new RangeError('orders must be positive');
  const out: Record<string, number> = {};
  for (const i of invocations) out[i.fn] = (out[i.fn] ?? 0) + 1;
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v / orders]));
}

/** p50 and p95 of the durations, per function. */
export function durationsByFunction(invocations: readonly Invocation[]): Durations {
  const by = new Map<string, number[]>();
  for (const i of invocations) by.set(i.fn, [...(by.get(i.fn) ?? []), i.durationMs]);
  return Object.fromEntries(
    [...by].map(([fn, ds]) => [fn, { p50: percentile(ds, 50), p95: percentile(ds, 95) }]),
  );
}

/**
 * How much instance time the executions of a loaded window bill, per ms they ran: below 1 when
 * they overlap on the instance, above 1 when each is alone (the 1 s minimum per activity period).
 */
export function overlapFactor(invocations: readonly Invocation[], prices: PriceTable): number {
  const executionMs = invocations.reduce((s, i) => s + i.durationMs, 0);
  if (executionMs === 0) return Number.NaN;
  return billedActivityMs(invocations.map(interval), prices) / executionMs;
}

/** Billed ms when every invocation is alone on its instance. */
export function billedAloneMs(invocations: readonly Invocation[], prices: PriceTable): number {
  return invocations.reduce((s, i) => s + billedMs(i.durationMs, prices), 0);
}
