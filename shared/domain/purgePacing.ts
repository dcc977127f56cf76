/**
 * When the purge takes its next order (no I/O): at once while nothing live waits or runs; while
 * live work does, at most one order per `minShareMs`, and never past the slice's time budget. The
 * adapter (shared/retention/purgePacer.ts) reads the live work and sleeps what this decides.
 */
export interface PurgePacing {
  /**
   * While live work waits, the purge still takes one order per this long, so it never starves.
   * 1 s: an order is about 10 table requests (~80 ms here), so the purge keeps under a tenth of
   * what it shares with live orders, yet clears 86,400 orders a day per purger however busy the app
   * (a day's expiry at 1 order/s of sustained traffic) and goes at full speed whenever it is quiet.
   */
  minShareMs: number;
  /** How often a paused purge looks at the live work again. */
  pollMs: number;
  /** The least time budget of a slice (its rate's share of the run when larger). */
  minSliceMs: number;
}

export const defaultPurgePacing: PurgePacing = { minShareMs: 1000, pollMs: 100, minSliceMs: 5000 };

export type PurgeStep = { kind: 'go' } | { kind: 'pause'; ms: number } | { kind: 'stop' };

export interface PurgeMoment {
  nowMs: number;
  /** Live invocations running here, or live messages waiting or being handled anywhere. */
  liveWork: boolean;
  /** When the purge last took an order (this process), if ever. */
  lastOrderMs: number | undefined;
  /** The slice starts no order after this instant while it is paused for live work. */
  deadlineMs: number;
}

/**
 * The next step before an order: go, pause (then ask again), or stop the slice (its budget ends
 * before its next share; the next slice goes on, and what it archived is not archived again).
 */
export function nextPurgeStep(at: PurgeMoment, pacing: PurgePacing): PurgeStep {
  if (!at.liveWork) return { kind: 'go' };
  const shareAt = at.lastOrderMs === undefined ? at.nowMs : at.lastOrderMs + pacing.minShareMs;
  if (at.nowMs >= shareAt) return { kind: 'go' };
  if (shareAt > at.deadlineMs) return { kind: 'stop' };
  return { kind: 'pause', ms: Math.max(1, Math.min(pacing.pollMs, shareAt - at.nowMs)) };
}

/** A slice's time budget: its orders at the purge rate, or the least budget when that is longer. */
export function sliceBudgetMs(orders: number, ratePerSecond: number, pacing: PurgePacing): number {
  return Math.max(pacing.minSliceMs, (orders * 1000) / Math.max(ratePerSecond, 1e-9));
}

/**
 * How many orders a slice judges and archives when live work runs as it starts: what its minimum
 * share lets it delete within its budget (at least one), so it does not archive orders it will
 * leave to the next slice.
 */
export function ordersWhileLive(orders: number, budgetMs: number, pacing: PurgePacing): number {
  return Math.max(1, Math.min(orders, Math.floor(budgetMs / pacing.minShareMs) + 1));
}
