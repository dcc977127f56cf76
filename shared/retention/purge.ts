import {
  archiveBlobName,
  expiredTombstoneDays,
  retentionCutoff,
  retentionVerdict,
  tombstoneCutoff,
  utcDay,
  type RetentionPolicy,
} from '../domain/retention.js';
import type { ProcessState } from '../domain/state.js';
import {
  defaultPurgePacing as defaultPacing,
  ordersWhileLive,
  sliceBudgetMs,
} from '../domain/purgePacing.js';
import { httpStatusOf } from '../stateStore/errors.js';
import { orderRowKey, rowToOrder, workflowVersionOf } from '../stateStore/rows.js';
import type { IndexedOrder } from '../stateStore/stateIndex.js';
import type { StateStore } from '../stateStore/stateStore.js';
import type { OrderArchive } from './archive.js';
import { PurgeCandidates } from './candidates.js';
import type { PurgePacer } from './purgePacer.js';
import {
  archiveDocument,
  fenceState,
  tombstoneAndClear,
  isTombstone,
  readPartition,
  sinceOf,
  type OrderPartition,
} from './orderPartition.js';
import type { RetentionTable } from './retentionTable.js';

export interface PurgeReport {
  /** Markers of an earlier slice (a crash) finished or undone. */
  resumed: number;
  /** Index entries past the cutoff read. */
  examined: number;
  purged: number;
  archived: number;
  /** Kept: held, or no longer what the entry said (moved on, younger). */
  keptHeld: number;
  keptOther: number;
  tombstonesExpired: number;
  /** True when the slice was full (or stopped at its budget for live work): more may be waiting. */
  more: boolean;
  /** Time the slice spent paused for live work. */
  pausedMs: number;
}

export interface PurgeContext {
  store: StateStore;
  table: RetentionTable;
  /** Absent: ORDER_ARCHIVE=off. */
  archive?: OrderArchive;
  policy: RetentionPolicy;
  now: Date;
  /** Gives way to live work between orders; absent: full speed. */
  pacer?: PurgePacer;
  /** The index entries kept between slices (one per store and process); absent: read every slice. */
  candidates?: PurgeCandidates;
  /** Test hook: throws at a named step, as a crash would stop the slice there. */
  crashAt?: (step: 'archived' | 'marked' | 'unlisted' | 'fenced') => void | Promise<void>;
}

/** The order's group as its state row names it (to put back what a purge took out). */
function groupOf(p: OrderPartition): IndexedOrder | null {
  if (!p.stateRow || !p.orderRow || isTombstone(p.orderRow)) return null;
  const since = sinceOf(p.stateRow);
  if (!since) return null;
  return {
    orderId: p.stateRow.partitionKey,
    state: p.stateRow.ProcessState as ProcessState,
    since,
    customerId: rowToOrder(p.orderRow).customerId,
    workflow: typeof p.stateRow.Workflow === 'string' ? p.stateRow.Workflow : '',
    workflowVersion: workflowVersionOf(p.stateRow),
  };
}

/** Whether the partition is a whole order past retention, named by this entry, and not held. */
function stillExpired(p: OrderPartition, entry: IndexedOrder, ctx: PurgeContext): 'purge' | 'held' | 'other' {
  if (!p.stateRow || !p.orderRow || isTombstone(p.orderRow)) return 'other';
  const since = sinceOf(p.stateRow);
  if (!since || p.stateRow.ProcessState !== entry.state || since.getTime() !== entry.since.getTime())
    return 'other';
  const verdict = retentionVerdict(
    { processState: entry.state, since, held: p.holdRow !== undefined },
    ctx.now,
    ctx.policy,
  );
  return verdict === 'purge' ? 'purge' : verdict === 'held' ? 'held' : 'other';
}

/**
 * Deletes a judged order: its group (with its counter) out of the index first, so a counted group
 * never outlives its order; then the fence (the state row deleted under the ETag it was judged by);
 * then the tombstone in place of `order`, the steps, the history, the in-flight row, the
 * tombstone's day row. The marker, written before, makes every step after it one the next slice
 * finishes.
 */
async function deleteJudged(ctx: PurgeContext, p: OrderPartition, entry: IndexedOrder, blobName?: string) {
  await ctx.store.stateIndex.leave(entry);
  await ctx.crashAt?.('unlisted');
  if (!(await fenceState(ctx.store.orders, p))) {
    // Someone moved the order since it was judged (a hold, a resubmit): it stays, and so does its group.
    await restore(ctx, entry.orderId);
    return false;
  }
  await ctx.crashAt?.('fenced');
  await finishDeleted(ctx, entry.orderId, blobName);
  return true;
}

/** After the fencing write: what is left of the partition and the order's other rows. */
async function finishDeleted(ctx: PurgeContext, orderId: string, blobName?: string): Promise<void> {
  await tombstoneAndClear(ctx.store.orders, orderId, ctx.now, blobName);
  await ctx.store.index.removeIfTerminal(orderId);
  await ctx.table.putTombstoneDay(utcDay(ctx.now), orderId);
  await ctx.table.deleteMarker(orderId);
}

/** The purge of this order stops: its group goes back if its state row names one. */
async function restore(ctx: PurgeContext, orderId: string): Promise<void> {
  const group = groupOf(await readPartition(ctx.store.orders, orderId));
  if (group) await ctx.store.stateIndex.enter(group);
  await ctx.table.deleteMarker(orderId);
}

/** A marker a crashed slice left: finish the purge it started, or undo it. */
async function resume(
  ctx: PurgeContext,
  marker: { entry: IndexedOrder; blobName?: string },
): Promise<boolean> {
  const { entry } = marker;
  const p = await readPartition(ctx.store.orders, entry.orderId);
  if (!p.stateRow && p.orderRow) {
    // Fenced before the crash: the rest follows.
    await ctx.store.stateIndex.leave(entry);
    await finishDeleted(ctx, entry.orderId, marker.blobName);
    return true;
  }
  // The archive was written before the marker (when archiving), so only the deletes remain.
  if (
    stillExpired(p, entry, ctx) === 'purge' &&
    (ctx.archive === undefined || marker.blobName !== undefined)
  ) {
    return deleteJudged(ctx, p, entry, marker.blobName);
  }
  await restore(ctx, entry.orderId);
  return false;
}

/** Tombstones past IDEMPOTENCY_RETENTION_DAYS: the `order` row goes, and the partition is empty. */
async function expireTombstones(ctx: PurgeContext, n: number): Promise<number> {
  const cutoff = tombstoneCutoff(ctx.now, ctx.policy.idempotencyRetentionDays);
  if (cutoff === null) return 0;
  const rows = await ctx.table.tombstonesBefore(utcDay(cutoff), n);
  const days = new Set(expiredTombstoneDays([...new Set(rows.map((r) => r.day))], cutoff));
  let expired = 0;
  for (const { day, orderId } of rows) {
    if (!days.has(day)) continue;
    try {
      const row = await ctx.store.orders.getEntity(orderId, orderRowKey);
      if (row.Tombstone === true) {
        await ctx.store.orders.deleteEntity(orderId, orderRowKey, { etag: row.etag });
        expired += 1;
      }
    } catch (e) {
      const status = httpStatusOf(e);
      if (status !== 404 && status !== 412) throw e;
    }
    await ctx.table.deleteTombstoneDay(day, orderId);
  }
  return expired;
}

/**
 * One bounded slice of the purge: finishes what a crashed slice left (its markers), then takes up
 * to `n` orders past retention, oldest first from the index's terminal states (read once and kept
 * between slices: ctx.candidates), re-judges each
 * against its own partition (held, moved on, younger: kept), archives the ones to go (exactly once
 * per order), and deletes them one by one at no more than the purge rate. While live work waits
 * or runs it keeps to its share of the time (ctx.pacer: before its reads and before each order),
 * and stops at its time budget; what it archived and left is not archived again by the next slice.
 */
export async function purgeSlice(ctx: PurgeContext, n: number): Promise<PurgeReport> {
  const report: PurgeReport = {
    resumed: 0,
    examined: 0,
    purged: 0,
    archived: 0,
    keptHeld: 0,
    keptOther: 0,
    tombstonesExpired: 0,
    more: false,
    pausedMs: 0,
  };
  const started = Date.now();
  const deadline =
    started + sliceBudgetMs(n, ctx.policy.purgeRatePerSecond, ctx.pacer?.pacing ?? defaultPacing);
  // The slice's reads are a piece of work too (a hundred-odd requests): they wait their turn.
  if (ctx.pacer && !(await ctx.pacer.next(deadline, true))) {
    report.more = true;
    report.pausedMs = ctx.pacer.takePaused();
    return report;
  }
  for (const marker of await ctx.table.markers(n)) {
    await resume(ctx, marker);
    report.resumed += 1;
  }
  const cutoff = retentionCutoff(ctx.now, ctx.policy.orderRetentionDays);
  if (cutoff !== null) {
    // Busy now: judge and archive only the slice's share, not orders it would leave to the next.
    const take = ctx.pacer && (await ctx.pacer.liveNow()) ? ordersWhileLive(n, ctx.pacer.pacing) : n;
    const candidates = ctx.candidates ?? new PurgeCandidates(ctx.store);
    // Held orders stay at the head of the oldest-first entries: a read goes past them (bounded).
    report.examined = await candidates.ensure(cutoff, async () => n + (await ctx.table.heldIds(1000)).length);
    const judged: { entry: IndexedOrder; p: OrderPartition; blobName?: string }[] = [];
    while (judged.length < take) {
      const entry = candidates.take();
      if (!entry) break;
      const p = await readPartition(ctx.store.orders, entry.orderId);
      const verdict = stillExpired(p, entry, ctx);
      if (verdict === 'held') report.keptHeld += 1;
      else if (verdict === 'other') report.keptOther += 1;
      else
        judged.push({
          entry,
          p,
          ...(ctx.archive ? { blobName: archiveBlobName(entry.orderId, entry.since) } : {}),
        });
    }
    report.more = judged.length >= take || candidates.mayHaveMore;
    // Judged orders not done with (the budget ran out, or a step failed) go back first in line:
    // the next slice judges them again (a marker left is resumed first; the archive keeps each
    // order once), so oldest first holds.
    let done = 0;
    try {
      if (ctx.archive && judged.length > 0) {
        const placed = await ctx.archive.append(
          judged.map((j) => ({ blobName: j.blobName!, document: archiveDocument(j.p, ctx.now) })),
        );
        // A day blob already in the archive tier sends its late orders to the next blob of the day.
        for (const j of judged) j.blobName = placed.get(j.entry.orderId) ?? j.blobName;
        report.archived = judged.length;
      }
      await ctx.crashAt?.('archived');
      for (const [i, j] of judged.entries()) {
        // The rate: the i-th order of the slice is not deleted before i / rate seconds.
        const due = started + (i * 1000) / ctx.policy.purgeRatePerSecond;
        if (Date.now() < due) await new Promise((r) => setTimeout(r, due - Date.now()));
        // The reads' piece goes on through the first order: a slice that paid for its reads and
        // then waited out its pause would stop at its budget with nothing purged, and the next
        // slice would read again (starved while live work never ends).
        if (i > 0 && ctx.pacer && !(await ctx.pacer.next(deadline))) {
          report.more = true;
          break;
        }
        await ctx.table.putMarker(j.entry, j.blobName);
        await ctx.crashAt?.('marked');
        if (await deleteJudged(ctx, j.p, j.entry, j.blobName)) report.purged += 1;
        else report.keptOther += 1;
        done = i + 1;
        ctx.pacer?.done();
      }
    } finally {
      candidates.putBack(judged.slice(done).map((x) => x.entry));
    }
  }
  // A slice that read and found nothing to delete ends its reads' piece here (a no-op otherwise).
  ctx.pacer?.done();
  report.tombstonesExpired = await expireTombstones(ctx, n);
  report.pausedMs = ctx.pacer?.takePaused() ?? 0;
  return report;
}
