import { purgeSelection, purgeableStates, type PurgeCandidate } from '../domain/retention.js';
import type { IndexedOrder } from '../stateStore/stateIndex.js';
import type { StateStore } from '../stateStore/stateStore.js';

/** How long entries read from the index are used before they are read again (see `fresh`). */
export const candidateTtlMs = 60_000;
/** The fewest entries a refill reads: a slice while live work runs takes only a few of them. */
export const candidateRefillMin = 200;

/**
 * The purge's candidates, kept in process between slices: the oldest-first index entries past the
 * cutoff, read once (one range query per index partition of each terminal state) and consumed
 * slice after slice, so a slice while live work runs costs the reads of the orders it takes, not
 * a hundred queries. Nothing here decides a purge: every candidate is judged again against its own
 * partition (state, since, hold, the fencing ETag), so one gone stale (held, moved on, purged by
 * another instance) is only a wasted read.
 *
 * Read again when used up, when older than `ttlMs`, or when the cutoff moved back (a clock stepped
 * back, a longer retention setting). A cutoff that moved on needs no read: what it admits became
 * terminal after the read's cutoff, so it is younger than every kept entry and oldest-first
 * still holds. Only an entry that comes back older (a released hold, a group put back by a repair
 * or an undone purge) waits for the next read: at most `ttlMs`.
 */
export class PurgeCandidates {
  private entries: IndexedOrder[] = [];
  private read: { cutoffMs: number; atMs: number; more: boolean } | undefined;

  constructor(
    private readonly store: StateStore,
    private readonly ttlMs = candidateTtlMs,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** Whether the kept entries may be used under this cutoff. */
  private fresh(cutoff: Date): boolean {
    const r = this.read;
    return (
      r !== undefined &&
      this.entries.length > 0 &&
      this.nowMs() - r.atMs < this.ttlMs &&
      cutoff.getTime() >= r.cutoffMs
    );
  }

  /**
   * Makes sure entries are there for a slice: reads the index when the kept ones may not be used.
   * `size` is the slice's size plus room for held orders (they stay at the head of the index),
   * asked only when a read is due. Returns how many entries it read (0 when the kept ones serve).
   */
  async ensure(cutoff: Date, size: () => Promise<number>): Promise<number> {
    if (this.fresh(cutoff)) return 0;
    const n = Math.max(await size(), candidateRefillMin);
    // One state at a time: the burst is one state's partitions, not every terminal state's at once.
    const read: { entries: IndexedOrder[]; more: boolean }[] = [];
    for (const s of purgeableStates) read.push(await this.store.stateIndex.oldestUntil(s, cutoff, n));
    const byId = new Map<string, IndexedOrder>();
    for (const e of read.flatMap((r) => r.entries)) if (!byId.has(e.orderId)) byId.set(e.orderId, e);
    const picked: PurgeCandidate[] = purgeSelection([...byId.values()], cutoff, n);
    this.entries = picked.map((c) => byId.get(c.orderId)!);
    this.read = {
      cutoffMs: cutoff.getTime(),
      atMs: this.nowMs(),
      more: read.some((r) => r.more) || byId.size > picked.length,
    };
    return read.reduce((k, r) => k + r.entries.length, 0);
  }

  /** The next candidate, oldest first; it leaves the kept list (judged, it is done with). */
  take(): IndexedOrder | undefined {
    return this.entries.shift();
  }

  /** Candidates a slice took but did not get to (it stopped at its budget): first in line again. */
  putBack(entries: IndexedOrder[]): void {
    this.entries.unshift(...entries);
  }

  /** Whether more may be past the cutoff than the kept entries (the last read stopped at its size). */
  get mayHaveMore(): boolean {
    return this.entries.length > 0 || (this.read?.more ?? false);
  }
}
