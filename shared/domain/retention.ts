import { isTerminal, type ProcessState } from './state.js';

/**
 * Retention rules (no I/O): which terminal orders have outlived ORDER_RETENTION_DAYS, which are
 * kept (live, held, young, retention off), how big a purge slice is, and where an order's archive
 * document goes. The purge (shared/retention/) only loads, archives and deletes what these decide.
 */
export interface RetentionPolicy {
  /** Days a terminal order is kept after it became terminal; 0 keeps everything. */
  orderRetentionDays: number;
  /** Days a purged order's tombstone answers a resubmission with 410 Gone. */
  idempotencyRetentionDays: number;
  /** Orders purged per second at most (averaged over a slice). */
  purgeRatePerSecond: number;
  /** Archive each order to Blob Storage before it is deleted. */
  archive: boolean;
}

export const defaultRetention: RetentionPolicy = {
  orderRetentionDays: 90,
  idempotencyRetentionDays: 365,
  purgeRatePerSecond: 20,
  archive: true,
};

const dayMs = 86_400_000;

/** The states an order can be purged from: the terminal ones. */
export const purgeableStates: readonly ProcessState[] = ['Processed', 'Compensated', 'Error'];

/** Orders that became terminal at or before this instant are past retention; null: keep all. */
export function retentionCutoff(now: Date, days: number): Date | null {
  if (days <= 0) return null;
  return new Date(now.getTime() - days * dayMs);
}

/** Tombstones written at or before this instant no longer need to answer (null: keep all). */
export function tombstoneCutoff(now: Date, days: number): Date | null {
  return retentionCutoff(now, days);
}

export interface RetainedOrder {
  processState: ProcessState;
  /** When the order entered its state (its state row's StateSince). */
  since: Date;
  held: boolean;
}

export type RetentionVerdict = 'purge' | 'live' | 'held' | 'young' | 'retention-off';

/** Whether an order is purged now, and if not, why it is kept. Held wins over everything. */
export function retentionVerdict(order: RetainedOrder, now: Date, policy: RetentionPolicy): RetentionVerdict {
  if (order.held) return 'held';
  if (!isTerminal(order.processState)) return 'live';
  const cutoff = retentionCutoff(now, policy.orderRetentionDays);
  if (cutoff === null) return 'retention-off';
  return order.since.getTime() <= cutoff.getTime() ? 'purge' : 'young';
}

/**
 * How many orders one slice purges: the rate over the time between Supervisor runs, at least one
 * and at most `max`, so a slice stays inside one run however the rate is set.
 */
export function sliceSize(policy: RetentionPolicy, runIntervalSeconds: number, max = 500): number {
  const n = Math.floor(policy.purgeRatePerSecond * Math.max(1, runIntervalSeconds));
  return Math.max(1, Math.min(max, n));
}

/** A candidate of the oldest-first index entries, one per terminal state read. */
export interface PurgeCandidate {
  orderId: string;
  state: ProcessState;
  since: Date;
}

/**
 * The slice: candidates of all terminal states merged oldest first, those past the cutoff, at most
 * `n`, each order once (an order listed under two states is taken at its older entry; the purge
 * re-checks it against its state row anyway).
 */
export function purgeSelection(
  candidates: PurgeCandidate[],
  cutoff: Date | null,
  n: number,
): PurgeCandidate[] {
  if (cutoff === null || n <= 0) return [];
  const seen = new Set<string>();
  const out: PurgeCandidate[] = [];
  const sorted = [...candidates].sort(
    (a, b) => a.since.getTime() - b.since.getTime() || (a.orderId < b.orderId ? -1 : 1),
  );
  for (const c of sorted) {
    if (out.length >= n) break;
    if (!purgeableStates.includes(c.state) || c.since.getTime() > cutoff.getTime()) continue;
    if (seen.has(c.orderId)) continue;
    seen.add(c.orderId);
    out.push(c);
  }
  return out;
}

/** `yyyy-mm-dd` (UTC) of an instant: archive blobs and tombstone lists are kept per day. */
export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/** Archive blobs per day: an order's blob follows from its id, so retries name the same one. */
export const archiveShards = 16;

function fnv(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * Where an order's archive document goes: one gzip'd JSON-lines blob per day it became terminal
 * and shard (`orders/{yyyy-mm-dd}/{shard}.jsonl.gz`), so a day of up to 16 x 50,000 orders (a block
 * blob's block limit) fits, and the name never depends on when the purge ran.
 */
export function archiveBlobName(orderId: string, terminalAt: Date): string {
  const shard = String(fnv(orderId) % archiveShards).padStart(2, '0');
  return `orders/${utcDay(terminalAt)}/${shard}.jsonl.gz`;
}

/** The days whose tombstones have all expired: every day strictly before the cutoff's day. */
export function expiredTombstoneDays(days: string[], cutoff: Date | null): string[] {
  if (cutoff === null) return [];
  const last = utcDay(cutoff);
  return days.filter((d) => d < last).sort();
}
