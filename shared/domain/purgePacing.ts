/**
 * When the purge does its next piece of work (a slice's reads, or one order; no I/O): at once
 * while nothing live waits or runs; while live work does, it keeps at most `liveShare` of the time,
 * and it starts nothing past the slice's time budget. The adapter (shared/retention/purgePacer.ts)
 * reads the live work and sleeps what this decides.
 */
export interface PurgePacing {
  /**
   * The purge's share of the time while live work waits: after a piece that took d ms it pauses
   * d·(1 − share)/share. 0.1: the purge costs live orders at most about a tenth of what it costs at
   * full speed, yet never starves: a tenth of full speed (~1.2 orders/s here, ~100,000 a day per
   * purger) however busy the app, and full speed whenever nothing live waits.
   */
  liveShare: number;
  /** How often a paused purge looks at the live work again. */
  pollMs: number;
  /** The least time budget of a slice (its orders at the purge rate when longer). */
  minSliceMs: number;
}

export const defaultPurgePacing: PurgePacing = { liveShare: 0.1, pollMs: 100, minSliceMs: 5000 };

export type PurgeStep = { kind: 'go' } | { kind: 'pause'; ms: number } | { kind: 'stop' };

export interface PurgeMoment {
  nowMs: number;
  /** Live invocations running here, or live messages waiting or being handled anywhere. */
  liveWork: boolean;
  /** The purge's last piece of work in this process, if any. */
  last: { startMs: number; endMs: number } | undefined;
  /** The slice starts nothing after this instant while it gives way to live work. */
  deadlineMs: number;
}

/** When the next piece may start while live work waits: after the last one's pause. */
export function turnAfter(last: PurgeMoment['last'], pacing: PurgePacing): number {
  if (!last) return -Infinity;
  const took = Math.max(0, last.endMs - last.startMs);
  return last.endMs + (took * (1 - pacing.liveShare)) / pacing.liveShare;
}

/**
 * The next step: go, pause (then ask again), or stop the slice (its budget ends before its next
 * turn; the next slice goes on, and what it archived is not archived again).
 */
export function nextPurgeStep(at: PurgeMoment, pacing: PurgePacing): PurgeStep {
  if (!at.liveWork) return { kind: 'go' };
  const turnAt = turnAfter(at.last, pacing);
  if (at.nowMs >= turnAt) return { kind: 'go' };
  if (turnAt > at.deadlineMs) return { kind: 'stop' };
  return { kind: 'pause', ms: Math.max(1, Math.min(pacing.pollMs, turnAt - at.nowMs)) };
}

/** A slice's time budget: its orders at the purge rate, or the least budget when that is longer. */
export function sliceBudgetMs(orders: number, ratePerSecond: number, pacing: PurgePacing): number {
  return Math.max(pacing.minSliceMs, (orders * 1000) / Math.max(ratePerSecond, 1e-9));
}

/**
 * How many orders a slice judges and archives when live work runs as it starts: its share of
 * them (at least one), so it does not archive many orders it will leave to the next slice.
 */
export function ordersWhileLive(orders: number, pacing: PurgePacing): number {
  return Math.max(1, Math.min(orders, Math.ceil(orders * pacing.liveShare)));
}
