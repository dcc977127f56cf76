import type { StateStoreConnection } from '../config/settings.js';
import type { ArchiveConnection } from '../config/retentionSettings.js';
import type { RetentionPolicy } from '../domain/retention.js';
import { StateStoreAccounts, storesOf, type OrderStore } from '../stateStore/accounts.js';
import type { PurgeReport } from './purge.js';
import { Retention, type PurgedOrder, type RetentionReadout } from './retention.js';
import type { LiveWork } from './liveWork.js';
import { PurgePacer } from './purgePacer.js';

/** What the app holds: one account's Retention, or one per account behind a router. */
export type OrderRetention = Retention | RetentionAccounts;

/**
 * Retention when orders are spread over several storage accounts (StateStoreAccounts): one
 * Retention per account, each purging its own account's expired orders from its own index and
 * keeping its own held list and purge status; an order's hold, tombstone and archive are asked of
 * the account that holds it. Every account archives to the one archive container.
 */
export class RetentionAccounts {
  private constructor(
    private readonly router: StateStoreAccounts,
    readonly parts: Retention[],
  ) {}

  static async open(
    store: OrderStore,
    connections: StateStoreConnection[],
    policy: RetentionPolicy,
    archive?: ArchiveConnection,
    liveWork?: LiveWork,
  ): Promise<OrderRetention> {
    const stores = storesOf(store);
    // One pacer for every account: the purge's share of the time while live work runs is the
    // process's, not each account's (N accounts pacing themselves would take N shares).
    const options = liveWork ? { pacer: new PurgePacer(liveWork) } : {};
    if (!(store instanceof StateStoreAccounts))
      return Retention.open(store, connections[0], policy, archive, options);
    if (connections.length !== stores.length) throw new Error('one connection per account is needed');
    const parts = await Promise.all(
      stores.map((s, i) => Retention.open(s, connections[i], policy, archive, options)),
    );
    return new RetentionAccounts(store, parts);
  }

  private async of(orderId: string): Promise<Retention> {
    const holder = await this.router.locate(orderId);
    return this.parts[this.router.stores.indexOf(holder)] ?? this.parts[0];
  }

  /** A slice in every account, one after the other (the Supervisor runs one at a time). */
  async purgeDue(now: Date, runIntervalSeconds: number): Promise<PurgeReport | undefined> {
    let total: PurgeReport | undefined;
    for (const part of this.parts) {
      const r = await part.purgeDue(now, runIntervalSeconds);
      if (!r) continue;
      total = total
        ? {
            resumed: total.resumed + r.resumed,
            examined: total.examined + r.examined,
            purged: total.purged + r.purged,
            archived: total.archived + r.archived,
            keptHeld: total.keptHeld + r.keptHeld,
            keptOther: total.keptOther + r.keptOther,
            tombstonesExpired: total.tombstonesExpired + r.tombstonesExpired,
            more: total.more || r.more,
            pausedMs: total.pausedMs + r.pausedMs,
          }
        : r;
    }
    return total;
  }

  async purged(orderId: string): Promise<PurgedOrder | null> {
    return (await this.of(orderId)).purged(orderId);
  }

  async archived(p: PurgedOrder): Promise<Awaited<ReturnType<Retention['archived']>>> {
    return (await this.of(p.orderId)).archived(p);
  }

  async hold(orderId: string, by: string, at: Date, reason?: string): ReturnType<Retention['hold']> {
    return (await this.of(orderId)).hold(orderId, by, at, reason);
  }

  async release(orderId: string, by: string, at: Date): ReturnType<Retention['release']> {
    return (await this.of(orderId)).release(orderId, by, at);
  }

  async holdOf(orderId: string): ReturnType<Retention['holdOf']> {
    return (await this.of(orderId)).holdOf(orderId);
  }

  /** Every account's readout merged: the oldest of the oldest, the sums, the latest purge. */
  async readout(now: Date): Promise<RetentionReadout> {
    const all = await Promise.all(this.parts.map((p) => p.readout(now)));
    const oldest = all
      .map((r) => r.oldestRetained)
      .filter((o): o is NonNullable<typeof o> => o !== null)
      .sort((a, b) => a.since.localeCompare(b.since))[0];
    const latest = (pick: (r: RetentionReadout) => Date | undefined) =>
      all.map(pick).reduce<Date | undefined>((a, b) => (b && (!a || b > a) ? b : a), undefined);
    const lastRun = all
      .map((r) => r.lastPurge)
      .sort((a, b) => (b.lastRunAt?.getTime() ?? 0) - (a.lastRunAt?.getTime() ?? 0))[0];
    const lastPurgedAt = latest((r) => r.lastPurge.lastPurgedAt);
    return {
      ...all[0],
      oldestRetained: oldest ?? null,
      pastRetentionWaiting: all.reduce((n, r) => n + r.pastRetentionWaiting, 0),
      waitingCapped: all.some((r) => r.waitingCapped),
      lastPurge: {
        ...lastRun,
        lastPurged: all.reduce((n, r) => n + (r.lastPurge.lastPurged ?? 0), 0),
        ...(lastPurgedAt ? { lastPurgedAt } : {}),
      },
      held: all.flatMap((r) => r.held),
    };
  }
}
