import type { TokenCredential } from '@azure/identity';
import type { StateStoreConnection } from '../config/settings.js';
import type { ArchiveConnection } from '../config/retentionSettings.js';
import type { HistoryEntry } from '../domain/history.js';
import { purgeableStates, retentionCutoff, sliceSize, type RetentionPolicy } from '../domain/retention.js';
import { ensureTable, tableClient } from '../stateStore/clients.js';
import { httpStatusOf } from '../stateStore/errors.js';
import { orderRowKey, stateRowKey } from '../stateStore/rows.js';
import type { StateStore } from '../stateStore/stateStore.js';
import { OrderArchive, type ArchivedOrder } from './archive.js';
import { PurgeCandidates } from './candidates.js';
import { holdRowKey, writeHold } from './orderPartition.js';
import { purgeSlice, type PurgeContext, type PurgeReport } from './purge.js';
import { RetentionTable, type PurgeStatus } from './retentionTable.js';
import type { LiveWork } from './liveWork.js';
import { PurgePacer } from './purgePacer.js';
import type { PurgePacing } from '../domain/purgePacing.js';

/** A purged order as its tombstone tells it. */
export interface PurgedOrder {
  orderId: string;
  purgedAt: Date;
  /** The archive blob holding its document; absent when it was purged with ORDER_ARCHIVE=off. */
  archiveBlob?: string;
  callerScope?: string;
}

export interface RetentionReadout {
  orderRetentionDays: number;
  idempotencyRetentionDays: number;
  archive: boolean;
  /** The terminal order longest kept (the oldest entry of the terminal states). */
  oldestRetained: { orderId: string; processState: string; since: string } | null;
  /** Orders past retention waiting for the purge, counted up to `waitingLimit`. */
  pastRetentionWaiting: number;
  waitingCapped: boolean;
  lastPurge: PurgeStatus;
  held: { orderId: string; heldBy: string; heldAt: string; reason?: string }[];
}

function tombstoneOf(orderId: string, row: Record<string, unknown>): PurgedOrder {
  const at = row.PurgedAt instanceof Date ? row.PurgedAt : new Date(String(row.PurgedAt));
  return {
    orderId,
    purgedAt: at,
    ...(typeof row.ArchiveBlob === 'string' ? { archiveBlob: row.ArchiveBlob } : {}),
    ...(typeof row.CallerScope === 'string' ? { callerScope: row.CallerScope } : {}),
  };
}

/** When the last slice found nothing to do, the next looks again after this long (per process). */
const idleRecheckMs = 10 * 60_000;
const waitingLimit = 10_000;

/**
 * Retention for one state store (one storage account): the purge slices the Supervisor runs,
 * legal holds, and what a purged order left (its tombstone, its archive document). Run once per
 * account when orders are spread over several.
 */
export class Retention {
  private idleUntil = 0;
  /** The index entries one slice read, consumed by the next slices (candidates.ts). */
  private readonly candidates: PurgeCandidates;

  private constructor(
    readonly store: StateStore,
    readonly table: RetentionTable,
    readonly policy: RetentionPolicy,
    readonly archive: OrderArchive | undefined,
    /** Gives way to live work between purged orders (one per process: the minimum share spans slices). */
    readonly pacer: PurgePacer | undefined,
  ) {
    this.candidates = new PurgeCandidates(store);
  }

  static async open(
    store: StateStore,
    connection: StateStoreConnection,
    policy: RetentionPolicy,
    archive?: ArchiveConnection,
    options: {
      table?: string;
      container?: string;
      credential?: TokenCredential;
      /** What the purge gives way to; absent: it goes at full speed (the rate) always. */
      liveWork?: LiveWork;
      pacing?: PurgePacing;
      /** The process's pacer when several accounts share one (then liveWork and pacing are its). */
      pacer?: PurgePacer;
    } = {},
  ): Promise<Retention> {
    const client = tableClient(connection, options.table ?? 'Retention', store.metrics, options.credential);
    await ensureTable(client);
    const opened =
      policy.archive && archive
        ? await OrderArchive.open(archive, {
            ...(options.container ? { container: options.container } : {}),
            ...(options.credential ? { credential: options.credential } : {}),
          })
        : undefined;
    const pacer =
      options.pacer ?? (options.liveWork ? new PurgePacer(options.liveWork, options.pacing) : undefined);
    return new Retention(store, new RetentionTable(client), policy, opened, pacer);
  }

  /** One slice now, whatever the idle back-off (tests, the chaos scenario). */
  async purgeNow(now: Date, n: number, crashAt?: PurgeContext['crashAt']): Promise<PurgeReport> {
    const report = await purgeSlice(
      {
        store: this.store,
        table: this.table,
        ...(this.archive ? { archive: this.archive } : {}),
        policy: this.policy,
        now,
        ...(this.pacer ? { pacer: this.pacer } : {}),
        candidates: this.candidates,
        ...(crashAt ? { crashAt } : {}),
      },
      n,
    );
    await this.table.saveStatus({
      lastRunAt: now,
      lastPurged: report.purged,
      lastKeptHeld: report.keptHeld,
      ...(report.purged > 0 ? { lastPurgedAt: now } : {}),
    });
    return report;
  }

  /**
   * The Supervisor's hook: a slice sized by the purge rate over the run interval, unless the last
   * slice of this process found nothing (then once per ten minutes: an idle purge costs a few
   * queries, not one per partition every 30 s). Undefined when no slice ran.
   */
  async purgeDue(now: Date, runIntervalSeconds: number): Promise<PurgeReport | undefined> {
    if (Date.now() < this.idleUntil) return undefined;
    try {
      const report = await this.purgeNow(now, sliceSize(this.policy, runIntervalSeconds));
      const idle = !report.more && report.resumed === 0;
      this.idleUntil = idle ? Date.now() + idleRecheckMs : 0;
      return report;
    } catch (e) {
      await this.table.saveStatus({ lastRunAt: now, lastError: (e as Error).message }).catch(() => undefined);
      throw e;
    }
  }

  /**
   * The tombstone of a purged order, or null (a live order, or none at all). An order between its
   * purge's fence and its tombstone (state row gone, `order` row not yet replaced, the marker
   * there) is purged already: the marker names its archive. Read in this order (order row, marker,
   * order row again) so a purge finishing meanwhile is seen by its tombstone.
   */
  async purged(orderId: string): Promise<PurgedOrder | null> {
    const first = await this.orderRow(orderId);
    if (first === null) return null;
    if (first.Tombstone === true) return tombstoneOf(orderId, first);
    const marker = await this.table.marker(orderId);
    if (marker) {
      // Before the fence the order still lives (its purge may yet be undone).
      if (await this.hasStateRow(orderId)) return null;
      return {
        orderId,
        purgedAt: marker.since,
        ...(marker.blobName !== undefined ? { archiveBlob: marker.blobName } : {}),
        ...(typeof first.CallerScope === 'string' ? { callerScope: first.CallerScope } : {}),
      };
    }
    const again = await this.orderRow(orderId);
    return again?.Tombstone === true ? tombstoneOf(orderId, again) : null;
  }

  private async orderRow(orderId: string): Promise<Record<string, unknown> | null> {
    try {
      return await this.store.orders.getEntity<Record<string, unknown>>(orderId, orderRowKey);
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      throw e;
    }
  }

  private async hasStateRow(orderId: string): Promise<boolean> {
    try {
      await this.store.orders.getEntity(orderId, stateRowKey, { queryOptions: { select: ['PartitionKey'] } });
      return true;
    } catch (e) {
      if (httpStatusOf(e) === 404) return false;
      throw e;
    }
  }

  /** The archived document of a purged order (null when not archived or not found). */
  async archived(p: PurgedOrder): Promise<ArchivedOrder | null> {
    if (!p.archiveBlob || !this.archive) return null;
    return this.archive.read(p.archiveBlob, p.orderId);
  }

  /** Places a legal hold; the held list row goes first (it is a superset). */
  async hold(orderId: string, by: string, at: Date, reason?: string) {
    await this.table.putHeld(orderId);
    const entry: HistoryEntry = {
      at,
      actor: 'operator',
      by,
      event: 'LegalHoldPlaced',
      ...(reason ? { outcome: reason.slice(0, 200) } : {}),
    };
    const result = await writeHold(
      this.store.orders,
      orderId,
      { by, at, ...(reason ? { reason } : {}) },
      entry,
    );
    if (result === 'gone') await this.table.deleteHeld(orderId);
    return result;
  }

  /** Lifts a legal hold; the held list row goes after. */
  async release(orderId: string, by: string, at: Date) {
    const entry: HistoryEntry = { at, actor: 'operator', by, event: 'LegalHoldReleased' };
    const result = await writeHold(this.store.orders, orderId, null, entry);
    if (result === 'done' || result === 'gone') await this.table.deleteHeld(orderId);
    return result;
  }

  /** The hold row of an order, or null. */
  async holdOf(orderId: string): Promise<{ heldBy: string; heldAt: Date; reason?: string } | null> {
    try {
      const r = await this.store.orders.getEntity<Record<string, unknown>>(orderId, holdRowKey);
      return {
        heldBy: String(r.HeldBy ?? ''),
        heldAt: r.HeldAt instanceof Date ? r.HeldAt : new Date(String(r.HeldAt)),
        ...(typeof r.Reason === 'string' ? { reason: r.Reason } : {}),
      };
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      throw e;
    }
  }

  /** The console's readout: a handful of range reads, whatever the size of the history. */
  async readout(now: Date): Promise<RetentionReadout> {
    const index = this.store.stateIndex;
    await index.layout.refresh();
    const firsts = await Promise.all(purgeableStates.map((s) => index.oldest(s, 1)));
    const oldest = firsts.flat().sort((a, b) => a.since.getTime() - b.since.getTime())[0];
    const cutoff = retentionCutoff(now, this.policy.orderRetentionDays);
    let waiting = 0;
    if (cutoff !== null) {
      const counts = await Promise.all(
        purgeableStates.map(async (s) => (await index.oldestUntil(s, cutoff, waitingLimit)).entries.length),
      );
      waiting = counts.reduce((a, b) => a + b, 0);
    }
    const held: RetentionReadout['held'] = [];
    for (const orderId of await this.table.heldIds(100)) {
      const h = await this.holdOf(orderId);
      if (h)
        held.push({
          orderId,
          heldBy: h.heldBy,
          heldAt: h.heldAt.toISOString(),
          ...(h.reason ? { reason: h.reason } : {}),
        });
    }
    return {
      orderRetentionDays: this.policy.orderRetentionDays,
      idempotencyRetentionDays: this.policy.idempotencyRetentionDays,
      archive: this.archive !== undefined,
      oldestRetained: oldest
        ? { orderId: oldest.orderId, processState: oldest.state, since: oldest.since.toISOString() }
        : null,
      pastRetentionWaiting: Math.min(waiting, waitingLimit),
      waitingCapped: waiting >= waitingLimit,
      lastPurge: await this.table.status(),
      held,
    };
  }
}
