import { odata, type TableClient, type TransactionAction } from '@azure/data-tables';
import type { TokenCredential } from '@azure/identity';
import type { StateStoreConnection } from '../config/settings.js';
import type { Order } from '../domain/order.js';
import { assertOrderId } from '../domain/orderId.js';
import { isTerminal, processStates, type OrderState, type ProcessState } from '../domain/state.js';
import { waitingStep } from '../domain/waiting.js';
import type { Decision } from '../domain/transition.js';
import { ensureTable, tableClient } from './clients.js';
import {
  ConcurrencyConflict,
  httpStatusOf,
  OrderAlreadyExists,
  OrderNotFound,
  TooManyConflicts,
} from './errors.js';
import {
  historyEntryToRow,
  historyRowEnd,
  historyRowPrefix,
  rowToHistoryEntry,
  type HistoryEntry,
} from './historyRows.js';
import { InFlightIndex, type ReconcileCursor } from './inFlightIndex.js';
import { liveRepairPage } from './liveRepair.js';
import { retryLaterIfRefused } from './patience.js';
import { mapPooled } from './pooled.js';
import { StoreMetrics } from './metrics.js';
import { defaultIndexPartitions, IndexLayout } from './indexLayout.js';
import { StateIndex, type IndexedOrder, type IndexFilter } from './stateIndex.js';
import {
  orderToRow,
  rowToOrder,
  rowToState,
  rowToStep,
  stateRowKey,
  stateToRow,
  stepToRow,
  orderRowKey,
  type Row,
} from './rows.js';

/** An order as loaded, with the ETags that guard the next write. */
export interface StoredOrder {
  order: Order;
  state: OrderState;
  /** `index`: the ETag of the in-flight index row as this order's last put wrote it. */
  etags: { state: string; steps: Record<string, string>; index?: string };
  /**
   * The submission's W3C traceparent (order row, written once): a later hop with no live trace
   * context, like the Supervisor's retry, continues the order's trace from it.
   */
  traceParent?: string;
  /** When the order entered its process state: the state index entry it is listed under. */
  stateSince?: Date;
}

/** The process-state row alone (no steps): what listings return. */
export type OrderSummary = Omit<OrderState, 'steps'>;

/** A line of the operator's list: the state row, confirmed, plus what the index carries. */
export type ListedOrder = OrderSummary & { customerId: string; workflowVersion: number; stateSince: Date };

/** A change the console's live view picks up. */
export interface OrderChange {
  orderId: string;
  processState: ProcessState;
  updatedAt: Date;
}

/**
 * How long an index entry the order's state row does not confirm is only hidden, not deleted: its
 * transaction may still be on its way (entries are written before it). Far above any transaction.
 */
const indexEntryGraceMs = 2 * 60_000;
/** Point reads a reconcile page makes at once (of different orders' partitions). */
const repairConcurrency = 32;

export interface StateStoreOptions {
  ordersTable?: string;
  inFlightTable?: string;
  /** The operator's state index and counters (stateIndex.ts). */
  stateIndexTable?: string;
  /** Partitions per state of the state index (ORDER_INDEX_PARTITIONS; indexLayout.ts). */
  stateIndexPartitions?: number;
  metrics?: StoreMetrics;
  /** Identity connections only; DefaultAzureCredential when absent. */
  credential?: TokenCredential;
  /** Reads-and-decides applyWithRetry makes before giving up (default 5). */
  maxConflictAttempts?: number;
  /** The in-flight index's grace for rows without a live order (default host.json's 10 min). */
  indexGraceSeconds?: number;
  /**
   * The longest an index row waits before the sweep reads its order again: the shortest
   * complete-by any transition sets (min of the step and claim timeouts). Without it a row waits
   * for the complete-by it was put with, which is right only while no later transition can set
   * an earlier one.
   */
  indexRecheckSeconds?: number;
}

export interface ReconcileProgress {
  /** State rows (stage orders) or index entries (stages entries:*) read. */
  scanned: number;
  /** Non-terminal orders whose in-flight index row was re-created. */
  recreated: number;
  /** Orders entered into the state index (written before it, or their group lost). */
  reindexed: number;
  /** Groups removed from the state index because no state row confirms them. */
  unlisted: number;
  /** Groups moved from an older partition layout of the state index to the current one. */
  relocated: number;
  /** Older layouts (partition counts) no longer read: the pass emptied them. */
  retiredLayouts?: number[];
  /** State rows read without the state index's marker (StateSince): the backfill is not done. */
  legacy?: number;
  next: ReconcileCursor | null;
}

export interface Page<T> {
  items: T[];
  /** Present when there may be more; pass it back to continue. */
  continuationToken?: string;
}

/**
 * The state store on Azure Table Storage. One partition per order; every write that changes an
 * order is one entity-group transaction guarded by ETags; a 412 surfaces as ConcurrencyConflict
 * and is never overwritten. The in-flight index (inFlightIndex.ts) is kept a superset of the
 * non-terminal orders.
 */
export class StateStore {
  readonly index: InFlightIndex;
  readonly stateIndex: StateIndex;

  private constructor(
    readonly orders: TableClient,
    inFlight: TableClient,
    stateIndexTable: TableClient,
    readonly metrics: StoreMetrics,
    private readonly maxConflictAttempts: number,
    layout: IndexLayout,
    indexGraceSeconds?: number,
    indexRecheckSeconds?: number,
  ) {
    this.index = new InFlightIndex(inFlight, orders, metrics, indexGraceSeconds, indexRecheckSeconds);
    this.stateIndex = new StateIndex(stateIndexTable, metrics, layout);
  }

  /** Connects and creates the tables on first use. */
  static async open(connection: StateStoreConnection, options: StateStoreOptions = {}): Promise<StateStore> {
    const metrics = options.metrics ?? new StoreMetrics();
    const orders = tableClient(connection, options.ordersTable ?? 'Orders', metrics, options.credential);
    const inFlight = tableClient(
      connection,
      options.inFlightTable ?? 'InFlight',
      metrics,
      options.credential,
    );
    const stateIndex = tableClient(
      connection,
      options.stateIndexTable ?? 'OrderIndex',
      metrics,
      options.credential,
    );
    await Promise.all([ensureTable(orders), ensureTable(inFlight), ensureTable(stateIndex)]);
    const layout = new IndexLayout(
      stateIndex,
      metrics,
      options.stateIndexPartitions ?? defaultIndexPartitions,
    );
    await layout.open();
    return new StateStore(
      orders,
      inFlight,
      stateIndex,
      metrics,
      options.maxConflictAttempts ?? 5,
      layout,
      options.indexGraceSeconds,
      options.indexRecheckSeconds,
    );
  }

  /**
   * Stores a new order: its index row first (so the index is a superset), then order, state and
   * step rows in one transaction. An existing orderId throws OrderAlreadyExists with its stored
   * request hash; nothing is overwritten. `history` is written in the same transaction.
   */
  async submit(
    order: Order,
    initial: OrderState,
    extras: { history?: HistoryEntry; traceParent?: string } = {},
  ): Promise<StoredOrder> {
    const { history, traceParent } = extras;
    assertOrderId(order.orderId);
    if (initial.orderId !== order.orderId) throw new Error('order and state name different orders');
    if (isTerminal(initial.processState)) throw new Error('a new order cannot start terminal');
    const indexEtag = await this.index.put(
      initial.orderId,
      initial.completeBy ?? new Date(),
      initial.updatedAt,
    );
    const listed = indexed(
      order.orderId,
      initial,
      initial.updatedAt,
      order.customerId,
      initial.workflowVersion,
    );
    const refused = async (e: unknown): Promise<never> => {
      await this.index.parkUntilGraceEnds(order.orderId, indexEtag, initial.updatedAt);
      throw e;
    };
    const entered = await this.stateIndex.enter(listed).catch(refused);
    const actions: TransactionAction[] = [
      [
        'create',
        orderToRow(order, { name: initial.workflow, version: initial.workflowVersion }, traceParent),
      ],
      ['create', { ...withIndexEtag(stateToRow(initial), indexEtag), StateSince: listed.since }],
      ...initial.steps.map((st, i): TransactionAction => ['create', stepToRow(order.orderId, i, st)]),
      ...(history ? [['create', historyEntryToRow(order.orderId, history)] as TransactionAction] : []),
    ];
    let response;
    try {
      response = await this.orders.submitTransaction(actions);
    } catch (e) {
      if (httpStatusOf(e) === 409) {
        await this.takeBack(listed, entered);
        const existing = await this.getRow(order.orderId, orderRowKey);
        throw new OrderAlreadyExists(order.orderId, existing ? rowToOrder(existing).requestHash : undefined);
      }
      const stored = await this.committedAfterAll(order, e);
      const ours =
        stored !== undefined &&
        stored.order.requestHash === order.requestHash &&
        stored.order.createdAt.getTime() === order.createdAt.getTime();
      if (ours) {
        if (!entered) await this.keepListed(listed);
        return stored;
      }
      if (stored) {
        await this.takeBack(listed, entered);
        throw new OrderAlreadyExists(order.orderId, stored.order.requestHash);
      }
      return refused(e);
    }
    const etag = (i: number): string => response.subResponses[i]?.etag ?? '*';
    const stored: StoredOrder = {
      order,
      state: initial,
      etags: {
        state: etag(1),
        steps: Object.fromEntries(initial.steps.map((st, i) => [st.name, etag(i + 2)])),
        ...(indexEtag !== undefined ? { index: indexEtag } : {}),
      },
      ...(traceParent !== undefined ? { traceParent } : {}),
      stateSince: listed.since,
    };
    if (!entered) await this.keepListed(listed);
    return stored;
  }

  /**
   * A submission transaction that failed without saying it was refused (a timeout, a connection
   * lost before the answer) may have committed. One read settles it: the order stored under its
   * id, or undefined when there is none or the read fails too (then it is refused, and its row
   * parked for the grace). The caller tells its own order (its body, created at its instant)
   * from another writer's of the same id. Before, a lost answer was a refusal: the client's retry
   * was answered from the stored order, which nobody had sent a process-order, and its row waited
   * out the grace (600 s).
   */
  private async committedAfterAll(order: Order, e: unknown): Promise<StoredOrder | undefined> {
    const status = httpStatusOf(e);
    // ServerBusy (503) and 4xx answers say the transaction was not applied.
    if (status !== undefined && (status < 500 || status === 503)) return undefined;
    return (await this.load(order.orderId).catch(() => null)) ?? undefined;
  }

  /**
   * One partition query: the order, its state and its steps; null when there is no such order.
   * History rows sort before `order` and are not read (a load costs the same after 1,000 entries).
   */
  async load(orderId: string): Promise<StoredOrder | null> {
    assertOrderId(orderId);
    const rows: Row[] = [];
    const pages = this.orders.listEntities<Record<string, unknown>>({
      queryOptions: { filter: odata`PartitionKey eq ${orderId} and RowKey ge ${orderRowKey}` },
    });
    for await (const row of pages) rows.push(row as Row);
    this.metrics.entitiesRead += rows.length;
    const orderRow = rows.find((r) => r.rowKey === orderRowKey);
    const stateRow = rows.find((r) => r.rowKey === stateRowKey);
    if (!orderRow || !stateRow) return null;
    const stepRows = rows
      .filter((r) => r.rowKey.startsWith('step:'))
      .sort((a, b) => Number(a.Index) - Number(b.Index));
    return {
      order: rowToOrder(orderRow),
      state: rowToState(stateRow, stepRows.map(rowToStep)),
      etags: {
        state: stateRow.etag,
        steps: Object.fromEntries(stepRows.map((r) => [rowToStep(r).name, r.etag])),
        ...(typeof stateRow.IndexETag === 'string' ? { index: stateRow.IndexETag } : {}),
      },
      ...(typeof orderRow.TraceParent === 'string' ? { traceParent: orderRow.TraceParent } : {}),
      ...(sinceOf(stateRow) !== undefined ? { stateSince: sinceOf(stateRow) } : {}),
    };
  }

  /**
   * Writes a transition: the state row and every changed step row, each with the ETag it was read
   * with, in one transaction, with the transition's `history` entry (no extra request). Never an
   * upsert. Throws ConcurrencyConflict when anyone wrote first (and then no entry is written).
   * A change of process state lists the order under its next state first (stateIndex.ts).
   */
  async save(current: StoredOrder, next: OrderState, history?: HistoryEntry): Promise<StoredOrder> {
    const orderId = current.state.orderId;
    if (next.orderId !== orderId || next.steps.length !== current.state.steps.length) {
      throw new Error('save: next state does not belong to the loaded order');
    }
    const reopening = isTerminal(current.state.processState) && !isTerminal(next.processState);
    const finishing = !isTerminal(current.state.processState) && isTerminal(next.processState);
    // Superset rule: an order that becomes in-flight again is indexed before the write (and
    // after, see below).
    // The index row's ETag travels in the state row (Replace would drop it otherwise).
    let indexEtag = current.etags.index;
    if (reopening) indexEtag = await this.index.put(orderId, next.completeBy ?? new Date(), next.updatedAt);
    // A wait the sweep reads only every few hours ends (or is cut short): the next deadline first.
    else if (endsWaitEarlier(current.state, next)) {
      indexEtag = await this.index.put(orderId, next.completeBy ?? new Date(), next.updatedAt);
    }
    const version = current.state.workflowVersion;
    const moving = next.processState !== current.state.processState;
    const since = moving ? next.updatedAt : (current.stateSince ?? null);
    const listed = indexed(orderId, next, since ?? next.updatedAt, current.order.customerId, version);
    const entered = moving && (await this.stateIndex.enter(listed));

    const stateRow = {
      ...withIndexEtag(stateToRow(next), indexEtag),
      ...(since ? { StateSince: since } : {}),
    } as ReturnType<typeof stateToRow>;
    const actions: TransactionAction[] = [['update', stateRow, 'Replace', { etag: current.etags.state }]];
    const changed: string[] = [];
    next.steps.forEach((st, i) => {
      const row = stepToRow(orderId, i, st);
      const before = stepToRow(orderId, i, current.state.steps[i]);
      if (JSON.stringify(row) === JSON.stringify(before)) return;
      const etag = current.etags.steps[st.name];
      if (etag === undefined) throw new Error(`save: no ETag for step ${st.name}`);
      actions.push(['update', row, 'Replace', { etag }]);
      changed.push(st.name);
    });
    if (history) actions.push(['create', historyEntryToRow(orderId, history)]);
    let response;
    try {
      response = await this.orders.submitTransaction(actions);
    } catch (e) {
      const status = httpStatusOf(e);
      if (moving && (status === 412 || status === 404)) await this.takeBack(listed, entered);
      if (status === 412) throw new ConcurrencyConflict(orderId, e);
      if (status === 404) throw new OrderNotFound(orderId);
      throw e;
    }
    const etag = (i: number): string => response.subResponses[i]?.etag ?? '*';
    const stepEtags = { ...current.etags.steps };
    changed.forEach((name, i) => (stepEtags[name] = etag(i + 1)));
    const stored: StoredOrder = {
      order: current.order,
      state: next,
      etags: { state: etag(0), steps: stepEtags, ...(indexEtag !== undefined ? { index: indexEtag } : {}) },
      ...(current.traceParent !== undefined ? { traceParent: current.traceParent } : {}),
      ...(since ? { stateSince: since } : {}),
    };

    // The second put changes the row's ETag: the state row's copy is then stale, and the
    // finishing save takes the careful path (read, check, delete) for this run.
    if (reopening) await this.index.put(orderId, next.completeBy ?? new Date(), next.updatedAt);
    if (finishing) await this.index.removeAsWritten(orderId, indexEtag).catch(() => undefined); // the sweep repairs
    if (moving && !entered) await this.keepListed(listed);
    if (moving) {
      // Best effort: readers and the reconcile pass remove groups the state row does not confirm.
      const before = current.stateSince ?? current.state.updatedAt;
      const previous = indexed(orderId, current.state, before, current.order.customerId, version);
      const leave = () => this.stateIndex.leave(previous);
      await leave().catch((e: unknown) => retryLaterIfRefused(e, leave));
    }
    return stored;
  }

  /**
   * Load, decide, save; on a concurrent write, load and decide again (bounded, with a short
   * back-off). `decide` may throw (a TransitionRefused, say): that ends the attempt and surfaces.
   */
  async applyWithRetry(
    orderId: string,
    decide: (current: StoredOrder) => Decision,
    describe?: (current: StoredOrder, decision: Decision) => HistoryEntry,
  ): Promise<{ stored: StoredOrder; decision: Decision; conflicts: number }> {
    // Not a transient-fault retry (cockatiel's job, and cockatiel 4 is ESM-only anyway): each
    // round re-reads newer state and decides afresh, so the loop is the optimistic-concurrency
    // protocol itself. Bounded, with a little jitter so two losers do not collide again.
    for (let conflicts = 0; ; conflicts++) {
      const current = await this.load(orderId);
      if (current === null) throw new OrderNotFound(orderId);
      const decision = decide(current);
      try {
        const stored = await this.save(current, decision.state, describe?.(current, decision));
        return { stored, decision, conflicts };
      } catch (e) {
        if (!(e instanceof ConcurrencyConflict)) throw e;
        if (conflicts + 1 >= this.maxConflictAttempts) throw new TooManyConflicts(orderId, conflicts + 1);
        await new Promise((r) => setTimeout(r, Math.random() * 20 * (conflicts + 1)));
      }
    }
  }

  /**
   * A writer whose transaction lost its race (412, 409: not a crash) takes back the group it
   * entered, so an ordinary race never leaves the counts above the truth. Writers racing at the
   * same instant share one group (its guard was created by one of them): if the state row now
   * confirms it (a racer that shared it won), it goes back in. Best effort: what a failure here
   * leaves, readers and the reconcile pass remove.
   */
  private async takeBack(listed: IndexedOrder, entered: boolean): Promise<void> {
    if (!entered) return;
    try {
      await this.stateIndex.leave(listed);
      await this.enterIfConfirmed(listed);
    } catch {
      // the repair pass removes an unconfirmed group
    }
  }

  /**
   * After a commit whose group was already there when entered: it may be a racer's, which that
   * racer takes back if it lost. Entered again (nothing when it is still there), so a committed
   * state is never without its group.
   */
  private async keepListed(listed: IndexedOrder): Promise<void> {
    try {
      await this.enterIfConfirmed(listed);
    } catch {
      // the full reconcile pass re-enters a missing group
    }
  }

  /**
   * Enters a group the state row confirms, then checks again: a third writer may have moved the
   * order on and left the group between the check and the entry. Its leave follows its commit, so
   * either it removes what this call entered or the second check sees its commit and this call
   * removes it: no group outlives its state once every writer has finished.
   */
  private async enterIfConfirmed(listed: IndexedOrder): Promise<void> {
    if (!(await this.confirms(listed))) return;
    const entered = await this.stateIndex.enter(listed);
    if (entered && !(await this.confirms(listed))) await this.stateIndex.leave(listed);
  }

  /** Whether the order's state row names this group (its state and StateSince). */
  private async confirms(listed: IndexedOrder): Promise<boolean> {
    const row = await this.getRow(listed.orderId, stateRowKey);
    return (
      row !== null && row.ProcessState === listed.state && sinceOf(row)?.getTime() === listed.since.getTime()
    );
  }

  /** The operator's list by state (kept for callers that need no other filter). */
  listOrdersByState(
    state: ProcessState,
    continuationToken?: string,
    pageSize = 50,
  ): Promise<Page<ListedOrder>> {
    return this.listOrders({ state }, continuationToken, pageSize);
  }

  /**
   * One page of the operator's list, newest state change first, from the state index: reads the
   * page's index entries and each one's state row (to confirm it), never the Orders table.
   * Unconfirmed entries are skipped (and deleted once past their grace). Reads at most
   * maxRequests index pages, then returns the token (a page may be short, never wrong).
   */
  async listOrders(
    filter: IndexFilter,
    continuationToken?: string,
    pageSize = 50,
    maxRequests = 5,
  ): Promise<Page<ListedOrder>> {
    if (!processStates.includes(filter.state)) {
      throw new RangeError(`unknown process state ${String(filter.state)}`);
    }
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000) {
      throw new RangeError('pageSize must be 1..1000');
    }
    const items: ListedOrder[] = [];
    let token = continuationToken;
    for (let request = 0; request < maxRequests && items.length < pageSize; request++) {
      const page = await this.stateIndex.page(filter, pageSize - items.length, token);
      items.push(...(await this.confirmed(page.rows)));
      token = page.continuationToken;
      if (!token) break;
    }
    return token ? { items, continuationToken: token } : { items };
  }

  /**
   * Orders whose process state changed after `after` and by `until`, oldest first, about `limit`
   * at most: reads O(changes) (one range per state and partition, plus each order's state row to
   * confirm it). `through`: every change up to it is in this answer (confirmed or not), so a feed
   * that asks next for changes after `through` misses none.
   */
  async changes(after: Date, until: Date, limit = 200): Promise<{ changes: OrderChange[]; through: Date }> {
    const { rows, through } = await this.stateIndex.changedSince(after, until, limit);
    const listed = await this.confirmed(rows);
    return {
      changes: listed.map((o) => ({
        orderId: o.orderId,
        processState: o.processState,
        updatedAt: o.updatedAt,
      })),
      through,
    };
  }

  /**
   * The order longest in a non-terminal state (Pending, Processing, Compensating): the first
   * confirmed `a:` entry of each, a handful of reads.
   */
  async oldestInFlight(): Promise<ListedOrder | null> {
    const firsts = await Promise.all(
      (['Pending', 'Processing', 'Compensating'] as const).map(async (state) => {
        const [first] = await this.confirmed(await this.stateIndex.oldest(state, 5));
        return first;
      }),
    );
    const found = firsts.filter((o): o is ListedOrder => o !== undefined);
    if (found.length === 0) return null;
    return found.reduce((a, b) => (a.stateSince.getTime() <= b.stateSince.getTime() ? a : b));
  }

  /**
   * Orders per state from the index's counters (O(1)): exactly the groups in the index, so at
   * least the truth and above it only by what failed writes left, until a reader or the
   * reconcile pass removes it (stateIndex.ts).
   */
  countsPerState(): Promise<Record<ProcessState, number>> {
    return this.stateIndex.totals();
  }

  /**
   * One page of the reconcile pass, the repair of both indexes for what no writer left behind
   * (a crash, a lost table, orders stored before the state index existed). Stage `orders` reads
   * the state rows, a page at a time: a non-terminal order without an in-flight index row gets one
   * back; an order written before the state index (no StateSince) is entered into it, and with
   * `full` every order's group is checked (one point read each) and re-entered when missing. The
   * stages `entries:{state}` (only with `full`) read that state's index entries and remove the
   * groups their state row does not confirm, which brings the counts back to the truth. Returns
   * the cursor to continue from, or null when the pass is through.
   */
  async reconcilePage(cursor: ReconcileCursor, pageSize = 1000): Promise<ReconcileProgress> {
    const progress: ReconcileProgress = {
      scanned: 0,
      recreated: 0,
      reindexed: 0,
      unlisted: 0,
      relocated: 0,
      next: null,
    };
    if (cursor.stage.startsWith('live:')) {
      return { ...progress, ...(await liveRepairPage(this.stateIndex, this.index, cursor, pageSize)) };
    }
    if (cursor.stage === 'orders') {
      const pages = this.orders
        .listEntities<Record<string, unknown>>({
          queryOptions: {
            filter: odata`RowKey eq ${stateRowKey}`,
            select: [
              'PartitionKey',
              'RowKey',
              'ProcessState',
              'CompleteBy',
              'StateSince',
              'UpdatedAt',
              'Workflow',
              'WorkflowVersion',
            ],
          },
        })
        .byPage({ maxPageSize: pageSize, continuationToken: cursor.token });
      const { value, done } = await pages.next();
      const rows = done || !value ? [] : (value as unknown as Row[]);
      this.metrics.entitiesRead += rows.length;
      progress.scanned = rows.length;
      progress.legacy = rows.filter((r) => sinceOf(r) === undefined).length;
      progress.recreated = await this.index.recreateMissing(rows);
      // Point reads of different orders' groups: several at a time, not one after the other.
      const entered = await mapPooled(rows, repairConcurrency, (row) =>
        this.reindex(row, cursor.full === true),
      );
      progress.reindexed = entered.filter(Boolean).length;
      const token = !done && value ? value.continuationToken : undefined;
      progress.next = token
        ? { ...cursor, token }
        : cursor.full
          ? { stage: `entries:${processStates[0]}`, full: true }
          : null;
      return progress;
    }
    const state = cursor.stage.slice('entries:'.length) as ProcessState;
    const page = await this.stateIndex.page({ state }, pageSize, cursor.token);
    progress.scanned = page.rows.length;
    const verified = await this.verify(page.rows, true);
    progress.unlisted = verified.removed;
    // Entries of an older layout (ORDER_INDEX_PARTITIONS changed) move to the current one.
    for (const entry of verified.entries) {
      if (await this.stateIndex.relocate(entry)) progress.relocated += 1;
    }
    const following = processStates[processStates.indexOf(state) + 1];
    progress.next = page.continuationToken
      ? { ...cursor, token: page.continuationToken }
      : following
        ? { stage: `entries:${following}`, full: true }
        : null;
    if (progress.next === null) progress.retiredLayouts = await this.stateIndex.retireEmptied();
    return progress;
  }

  /**
   * Enters an order's group when it is missing: always for a state row from before the state
   * index (no StateSince; the row then gets one, so the next pass skips it), for every row in a
   * full pass. A group entered for a state the order has just left is removed like any other
   * unconfirmed one. True when a group was entered.
   */
  private async reindex(row: Row, full: boolean): Promise<boolean> {
    const legacy = sinceOf(row) === undefined;
    if (!legacy && !full) return false;
    const state = row.ProcessState as ProcessState;
    if (!processStates.includes(state)) return false;
    const since =
      sinceOf(row) ?? (row.UpdatedAt instanceof Date ? row.UpdatedAt : new Date(String(row.UpdatedAt)));
    const orderId = row.partitionKey;
    let entered = false;
    if (!(await this.stateIndex.has({ orderId, state, since }))) {
      const orderRow = await this.getRow(orderId, orderRowKey);
      if (orderRow === null) return false;
      await this.stateIndex.enter({
        orderId,
        state,
        since,
        customerId: rowToOrder(orderRow).customerId,
        workflow: typeof row.Workflow === 'string' ? row.Workflow : '',
        workflowVersion: versionOf(row),
      });
      entered = true;
    }
    if (legacy) {
      // The row now names the entry that lists it; a writer that got there first wins (412).
      await this.orders
        .updateEntity({ partitionKey: orderId, rowKey: stateRowKey, StateSince: since }, 'Merge', {
          etag: row.etag,
        })
        .catch((e: unknown) => {
          if (httpStatusOf(e) !== 412 && httpStatusOf(e) !== 404) throw e;
        });
    }
    return entered;
  }

  /** One page of an order's history, oldest first; null when there is no such order. */
  async history(
    orderId: string,
    pageSize = 100,
    continuationToken?: string,
  ): Promise<(Page<HistoryEntry> & { exists: boolean }) | null> {
    assertOrderId(orderId);
    const filter = odata`PartitionKey eq ${orderId} and RowKey gt ${historyRowPrefix} and RowKey lt ${historyRowEnd}`;
    const pages = this.orders
      .listEntities<Record<string, unknown>>({ queryOptions: { filter } })
      .byPage({ maxPageSize: pageSize, continuationToken });
    const { value, done } = await pages.next();
    const rows = done || !value ? [] : value;
    this.metrics.entitiesRead += rows.length;
    if (rows.length === 0 && continuationToken === undefined) {
      if ((await this.getRow(orderId, stateRowKey)) === null) return null;
    }
    const items = rows.map((r) => rowToHistoryEntry(r as Row));
    const next = !done && value ? value.continuationToken : undefined;
    return next ? { items, continuationToken: next, exists: true } : { items, exists: true };
  }

  /** Keeps the entries their order's state row confirms; deletes stale ones past their grace. */
  private async confirmed(rows: IndexedOrder[]): Promise<ListedOrder[]> {
    return (await this.verify(rows)).listed;
  }

  /** `repairOnly`: the reconcile pass, which lists nothing, reads only what confirms an entry. */
  private async verify(
    rows: IndexedOrder[],
    repairOnly = false,
  ): Promise<{ listed: ListedOrder[]; entries: IndexedOrder[]; removed: number }> {
    const now = Date.now();
    let removed = 0;
    const select = repairOnly ? ['ProcessState', 'StateSince'] : undefined;
    const read = async (entry: IndexedOrder) => ({
      entry,
      row: await this.getRow(entry.orderId, stateRowKey, select),
    });
    const checked = repairOnly
      ? await mapPooled(rows, repairConcurrency, read)
      : await Promise.all(rows.map(read));
    const out: ListedOrder[] = [];
    const entries: IndexedOrder[] = [];
    for (const { entry, row } of checked) {
      const since = row ? sinceOf(row)?.getTime() : undefined;
      const confirms =
        row !== null &&
        row.ProcessState === entry.state &&
        (since === undefined || since === entry.since.getTime());
      if (confirms) {
        if (!repairOnly) {
          const { steps: _steps, ...summary } = rowToState(row, []);
          out.push({
            ...summary,
            customerId: entry.customerId,
            workflowVersion: versionOf(row),
            stateSince: entry.since,
          });
        }
        entries.push(entry);
        continue;
      }
      const superseded = since !== undefined && since > entry.since.getTime();
      if (superseded || now - entry.since.getTime() > indexEntryGraceMs) {
        if (await this.stateIndex.leave(entry).catch(() => false)) removed += 1;
      }
    }
    return { listed: out, entries, removed };
  }

  private async getRow(orderId: string, rowKey: string, select?: string[]): Promise<Row | null> {
    try {
      const row = await this.orders.getEntity<Record<string, unknown>>(
        orderId,
        rowKey,
        select ? { queryOptions: { select } } : {},
      );
      this.metrics.entitiesRead += 1;
      return row as Row;
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      throw e;
    }
  }
}

/** An order that waited (Waiting on its state row) moves to a complete-by earlier than the wait's. */
function endsWaitEarlier(before: OrderState, next: OrderState): boolean {
  if (!waitingStep(before) || isTerminal(next.processState)) return false;
  if (!waitingStep(next)) return true;
  return (next.completeBy?.getTime() ?? 0) < (before.completeBy?.getTime() ?? 0);
}

/** What the state index lists an order under. */
function indexed(
  orderId: string,
  state: OrderState,
  since: Date,
  customerId: string,
  workflowVersion: number,
): IndexedOrder {
  return { orderId, state: state.processState, since, customerId, workflow: state.workflow, workflowVersion };
}

function sinceOf(row: Row): Date | undefined {
  const v = row.StateSince;
  return v instanceof Date ? v : typeof v === 'string' ? new Date(v) : undefined;
}

/** A state row without the column was written before workflow versions: version 1. */
function versionOf(row: Row): number {
  return typeof row.WorkflowVersion === 'number' ? row.WorkflowVersion : 1;
}

/** The state row with the ETag of the order's index row as last written by its own put. */
function withIndexEtag<T extends object>(row: T, indexEtag: string | undefined): T {
  return indexEtag === undefined ? row : { ...row, IndexETag: indexEtag };
}
