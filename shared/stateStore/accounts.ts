import type { TableClient } from '@azure/data-tables';
import type { Settings, StateStoreConnection } from '../config/settings.js';
import type { ProcessState } from '../domain/state.js';
import type { Order } from '../domain/order.js';
import type { OrderState } from '../domain/state.js';
import type { Decision } from '../domain/transition.js';
import { AccountLayout } from './accountLayout.js';
import { httpStatusOf, OrderAlreadyExists, OrderNotFound } from './errors.js';
import type { HistoryEntry } from './historyRows.js';
import type { InFlightIndex, ReconcileCursor, SweepResult } from './inFlightIndex.js';
import { mergedToken, resumeFrom } from './mergedRange.js';
import { StoreMetrics } from './metrics.js';
import { orderRowKey } from './rows.js';
import { firstLiveStage } from './liveRepair.js';
import { indexRowKeys, type IndexFilter } from './stateIndex.js';
import {
  StateStore,
  type ListedOrder,
  type OrderChange,
  type Page,
  type ReconcileProgress,
  type StateStoreOptions,
  type StoredOrder,
} from './stateStore.js';

/**
 * Orders spread over several storage accounts (StateStoreAccounts): one full StateStore per
 * account (its Orders, InFlight and OrderIndex tables), so an order's rows, its in-flight index row
 * and its state index entries all live in its own account and every request divides by N. This
 * module routes: an order's reads and writes go to its account (accountLayout.ts), and every read
 * across orders (lists, counts, changes, oldest in flight, the sweep, the reconcile pass) covers
 * every account. With one account the app uses the plain StateStore: nothing changes.
 */
export class StateStoreAccounts {
  /** Account 0's in-flight index: the repair ledger of the whole pass lives there. */
  readonly index: InFlightIndex;
  /** Which account an order was loaded from, so its save goes back there without a lookup. */
  private readonly owners = new WeakMap<StoredOrder, StateStore>();

  constructor(
    readonly stores: StateStore[],
    readonly layout: AccountLayout,
    readonly metrics: StoreMetrics,
  ) {
    this.index = stores[0].index;
  }

  static async open(
    connections: StateStoreConnection[],
    options: StateStoreOptions = {},
  ): Promise<StateStoreAccounts> {
    const metrics = options.metrics ?? new StoreMetrics();
    const stores = await Promise.all(connections.map((c) => StateStore.open(c, { ...options, metrics })));
    const layout = new AccountLayout(stores[0].stateIndex.table, metrics, stores.length);
    await layout.open(() => holdsAnyOrder(stores[0].orders));
    return new StateStoreAccounts(stores, layout, metrics);
  }

  /** The account a new order goes to. */
  home(orderId: string): StateStore {
    return this.stores[this.layout.home(orderId)];
  }

  /**
   * The account holding an order: its current one unless an earlier layout's holds it (a point
   * read per earlier layout, only while one is listed); the current one when none does.
   */
  async locate(orderId: string): Promise<StateStore> {
    const [first, ...earlier] = this.candidates(orderId);
    if (earlier.length === 0 || (await exists(first, orderId))) return first;
    for (const store of earlier) if (await exists(store, orderId)) return store;
    return first;
  }

  private candidates(orderId: string): StateStore[] {
    return this.layout.candidates(orderId).map((a) => this.stores[a]);
  }

  private owned(stored: StoredOrder, store: StateStore): StoredOrder {
    this.owners.set(stored, store);
    return stored;
  }

  /** A new order, in its account; an id stored under an earlier layout is a duplicate there. */
  async submit(
    order: Order,
    initial: OrderState,
    extras: { history?: HistoryEntry; traceParent?: string } = {},
  ): Promise<StoredOrder> {
    const [home, ...earlier] = this.candidates(order.orderId);
    for (const store of earlier) {
      const existing = await store.load(order.orderId);
      if (existing) throw new OrderAlreadyExists(order.orderId, existing.order.requestHash);
    }
    return this.owned(await home.submit(order, initial, extras), home);
  }

  async load(orderId: string): Promise<StoredOrder | null> {
    for (const store of this.candidates(orderId)) {
      const stored = await store.load(orderId);
      if (stored) return this.owned(stored, store);
    }
    return null;
  }

  async save(current: StoredOrder, next: OrderState, history?: HistoryEntry): Promise<StoredOrder> {
    const store = this.owners.get(current) ?? (await this.locate(current.state.orderId));
    return this.owned(await store.save(current, next, history), store);
  }

  async applyWithRetry(
    orderId: string,
    decide: (current: StoredOrder) => Decision,
    describe?: (current: StoredOrder, decision: Decision) => HistoryEntry,
  ): Promise<{ stored: StoredOrder; decision: Decision; conflicts: number }> {
    const stores = this.candidates(orderId);
    for (const [i, store] of stores.entries()) {
      try {
        const result = await store.applyWithRetry(orderId, decide, describe);
        this.owned(result.stored, store);
        return result;
      } catch (e) {
        if (!(e instanceof OrderNotFound) || i + 1 >= stores.length) throw e;
      }
    }
    throw new OrderNotFound(orderId);
  }

  async history(
    orderId: string,
    pageSize = 100,
    continuationToken?: string,
  ): Promise<(Page<HistoryEntry> & { exists: boolean }) | null> {
    if (continuationToken !== undefined) {
      return (await this.locate(orderId)).history(orderId, pageSize, continuationToken);
    }
    for (const store of this.candidates(orderId)) {
      const page = await store.history(orderId, pageSize);
      if (page !== null) return page;
    }
    return null;
  }

  listOrdersByState(
    state: ProcessState,
    continuationToken?: string,
    pageSize = 50,
  ): Promise<Page<ListedOrder>> {
    return this.listOrders({ state }, continuationToken, pageSize);
  }

  /**
   * One page across the accounts, in the index's key order (newest first). Every account reads
   * from the same key (the token), a page of its own; an account that stopped short (it has
   * more) bounds what the merge may show, since its next entries may sort before the others'.
   * Costs up to one page per account.
   */
  async listOrders(
    filter: IndexFilter,
    continuationToken?: string,
    pageSize = 50,
    maxRequests = 5,
  ): Promise<Page<ListedOrder>> {
    const pages = await Promise.all(
      this.stores.map((s) => s.listOrders(filter, continuationToken, pageSize, maxRequests)),
    );
    const keyed = pages
      .flatMap((p) => p.items)
      .map((item) => ({ item, key: listKey(filter, item) }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const bounds = pages
      .map((p) => (p.continuationToken ? resumeFrom(p.continuationToken).after : undefined))
      .filter((k): k is string => k !== undefined);
    const bound = bounds.length > 0 ? bounds.reduce((a, b) => (a < b ? a : b)) : undefined;
    const eligible = bound === undefined ? keyed : keyed.filter((k) => k.key <= bound);
    const shown = eligible.slice(0, pageSize);
    const items = shown.map((k) => k.item);
    if (eligible.length > pageSize) return { items, continuationToken: mergedToken(shown.at(-1)!.key) };
    if (bound !== undefined) return { items, continuationToken: mergedToken(bound) };
    return { items };
  }

  /**
   * Every account's changes; `through` is the earliest account's, so nothing up to it is
   * missed. A change past it that another account already returned may come again next time.
   */
  async changes(after: Date, until: Date, limit = 200): Promise<{ changes: OrderChange[]; through: Date }> {
    const all = await Promise.all(this.stores.map((s) => s.changes(after, until, limit)));
    const through = new Date(Math.min(...all.map((a) => a.through.getTime())));
    const changes = all
      .flatMap((a) => a.changes)
      .sort((a, b) => a.updatedAt.getTime() - b.updatedAt.getTime());
    return { changes, through };
  }

  async oldestInFlight(): Promise<ListedOrder | null> {
    const found = (await Promise.all(this.stores.map((s) => s.oldestInFlight()))).filter(
      (o): o is ListedOrder => o !== null,
    );
    if (found.length === 0) return null;
    return found.reduce((a, b) => (a.stateSince.getTime() <= b.stateSince.getTime() ? a : b));
  }

  async countsPerState(): Promise<Record<ProcessState, number>> {
    const all = await Promise.all(this.stores.map((s) => s.countsPerState()));
    const sum = { ...all[0] };
    for (const counts of all.slice(1)) {
      for (const [state, n] of Object.entries(counts)) sum[state as ProcessState] += n;
    }
    return sum;
  }

  /**
   * One page of the reconcile pass, account after account: the cursor's token carries the
   * account (`a{n}:` before the account's own token), so the one ledger in account 0 holds the
   * whole pass. A token without it (a pass begun with one account) is account 0's.
   */
  async reconcilePage(cursor: ReconcileCursor, pageSize = 1000): Promise<ReconcileProgress> {
    const { account, token } = splitToken(cursor.token);
    const store = this.stores[account] ?? this.stores[0];
    const { token: _t, ...rest } = cursor;
    const progress = await store.reconcilePage(token ? { ...rest, token } : rest, pageSize);
    if (progress.next) {
      progress.next = { ...progress.next, token: `a${account}:${progress.next.token ?? ''}` };
    } else if (account + 1 < this.stores.length) {
      const stage = cursor.stage.startsWith('live:') ? firstLiveStage : 'orders';
      progress.next = { stage, token: `a${account + 1}:`, ...(cursor.full ? { full: true } : {}) };
    }
    return progress;
  }
}

/** What `Dependencies.store` holds: one account's store, or the accounts' router. */
export type OrderStore = StateStore | StateStoreAccounts;

/** Every account's store. */
export function storesOf(store: OrderStore): StateStore[] {
  return store instanceof StateStoreAccounts ? store.stores : [store];
}

/** The Supervisor's sweep over every account's in-flight index. */
export async function sweepEveryAccount(store: OrderStore, now: Date): Promise<SweepResult> {
  const results = await Promise.all(storesOf(store).map((s) => s.index.sweep(now)));
  return {
    timedOut: results.flatMap((r) => r.timedOut),
    examined: results.reduce((n, r) => n + r.examined, 0),
    removed: results.reduce((n, r) => n + r.removed, 0),
    deferred: results.reduce((n, r) => n + r.deferred, 0),
  };
}

/** In-flight count and oldest put over every account (the Supervisor's gauges). */
export async function inFlightSummary(
  store: OrderStore,
): Promise<{ count: number; oldestPutAt: Date | undefined }> {
  const all = await Promise.all(storesOf(store).map((s) => s.index.summary()));
  const oldest = all.map((a) => a.oldestPutAt?.getTime()).filter((t): t is number => t !== undefined);
  return {
    count: all.reduce((n, a) => n + a.count, 0),
    oldestPutAt: oldest.length > 0 ? new Date(Math.min(...oldest)) : undefined,
  };
}

/** The Orders table holding an order (a dead letter's order, say). */
export async function ordersTableOf(store: OrderStore, orderId: string): Promise<TableClient> {
  return store instanceof StateStoreAccounts ? (await store.locate(orderId)).orders : store.orders;
}

/**
 * The app's state store from its settings: the plain StateStore for one account (refused if the
 * account layout row says orders were spread over more), the router for several.
 */
export async function openOrderStore(
  s: Pick<Settings, 'stateStore' | 'stateStoreAccounts'>,
  options: StateStoreOptions = {},
): Promise<OrderStore> {
  if (s.stateStoreAccounts.length > 1) return StateStoreAccounts.open(s.stateStoreAccounts, options);
  const store = await StateStore.open(s.stateStore, options);
  await new AccountLayout(store.stateIndex.table, store.metrics, 1).open(async () => false);
  return store;
}

/** The key a listed order sorts by in the state index under this filter (stateIndex.ts). */
function listKey(filter: IndexFilter, o: ListedOrder): string {
  const keys = indexRowKeys({
    orderId: o.orderId,
    state: filter.state,
    since: o.stateSince,
    customerId: o.customerId,
    workflow: o.workflow,
    workflowVersion: o.workflowVersion,
  });
  return filter.customerId !== undefined ? keys[1] : filter.workflowVersion !== undefined ? keys[2] : keys[0];
}

function splitToken(token: string | undefined): { account: number; token?: string } {
  const m = token === undefined ? null : /^a(\d+):(.*)$/s.exec(token);
  if (!m) return token ? { account: 0, token } : { account: 0 };
  return m[2] ? { account: Number(m[1]), token: m[2] } : { account: Number(m[1]) };
}

async function exists(store: StateStore, orderId: string): Promise<boolean> {
  try {
    await store.orders.getEntity(orderId, orderRowKey, { queryOptions: { select: ['PartitionKey'] } });
    store.metrics.entitiesRead += 1;
    return true;
  } catch (e) {
    if (httpStatusOf(e) === 404) return false;
    throw e;
  }
}

async function holdsAnyOrder(orders: TableClient): Promise<boolean> {
  const pages = orders
    .listEntities({ queryOptions: { select: ['PartitionKey'] } })
    .byPage({ maxPageSize: 1 });
  const { value, done } = await pages.next();
  return !done && value !== undefined && value.length > 0;
}
