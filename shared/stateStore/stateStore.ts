import { odata, type TableClient, type TransactionAction } from '@azure/data-tables';
import type { TokenCredential } from '@azure/identity';
import type { StateStoreConnection } from '../config/settings.js';
import type { Order } from '../domain/order.js';
import { assertOrderId } from '../domain/orderId.js';
import { isTerminal, processStates, type OrderState, type ProcessState } from '../domain/state.js';
import type { Decision } from '../domain/transition.js';
import { ensureTable, tableClient } from './clients.js';
import {
  ConcurrencyConflict,
  httpStatusOf,
  OrderAlreadyExists,
  OrderNotFound,
  TooManyConflicts,
} from './errors.js';
import { InFlightIndex } from './inFlightIndex.js';
import { StoreMetrics } from './metrics.js';
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
}

/** The process-state row alone (no steps): what listings return. */
export type OrderSummary = Omit<OrderState, 'steps'>;

export interface StateStoreOptions {
  ordersTable?: string;
  inFlightTable?: string;
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

  private constructor(
    readonly orders: TableClient,
    inFlight: TableClient,
    readonly metrics: StoreMetrics,
    private readonly maxConflictAttempts: number,
    indexGraceSeconds?: number,
    indexRecheckSeconds?: number,
  ) {
    this.index = new InFlightIndex(inFlight, orders, metrics, indexGraceSeconds, indexRecheckSeconds);
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
    await Promise.all([ensureTable(orders), ensureTable(inFlight)]);
    return new StateStore(
      orders,
      inFlight,
      metrics,
      options.maxConflictAttempts ?? 5,
      options.indexGraceSeconds,
      options.indexRecheckSeconds,
    );
  }

  /**
   * Stores a new order: its index row first (so the index is a superset), then order, state and
   * step rows in one transaction. An existing orderId throws OrderAlreadyExists with its stored
   * request hash; nothing is overwritten.
   */
  async submit(order: Order, initial: OrderState, traceParent?: string): Promise<StoredOrder> {
    assertOrderId(order.orderId);
    if (initial.orderId !== order.orderId) throw new Error('order and state name different orders');
    if (isTerminal(initial.processState)) throw new Error('a new order cannot start terminal');
    const indexEtag = await this.index.put(
      initial.orderId,
      initial.completeBy ?? new Date(),
      initial.updatedAt,
    );
    const actions: TransactionAction[] = [
      [
        'create',
        orderToRow(order, { name: initial.workflow, version: initial.workflowVersion }, traceParent),
      ],
      ['create', withIndexEtag(stateToRow(initial), indexEtag)],
      ...initial.steps.map((st, i): TransactionAction => ['create', stepToRow(order.orderId, i, st)]),
    ];
    let response;
    try {
      response = await this.orders.submitTransaction(actions);
    } catch (e) {
      if (httpStatusOf(e) === 409) {
        const existing = await this.getRow(order.orderId, orderRowKey);
        throw new OrderAlreadyExists(order.orderId, existing ? rowToOrder(existing).requestHash : undefined);
      }
      throw e;
    }
    const etag = (i: number): string => response.subResponses[i]?.etag ?? '*';
    return {
      order,
      state: initial,
      etags: {
        state: etag(1),
        steps: Object.fromEntries(initial.steps.map((st, i) => [st.name, etag(i + 2)])),
        ...(indexEtag !== undefined ? { index: indexEtag } : {}),
      },
      ...(traceParent !== undefined ? { traceParent } : {}),
    };
  }

  /** One partition query: the order, its state and its steps; null when there is no such order. */
  async load(orderId: string): Promise<StoredOrder | null> {
    assertOrderId(orderId);
    const rows: Row[] = [];
    const pages = this.orders.listEntities<Record<string, unknown>>({
      queryOptions: { filter: odata`PartitionKey eq ${orderId}` },
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
    };
  }

  /**
   * Writes a transition: the state row and every changed step row, each with the ETag it was read
   * with, in one transaction. Never an upsert. Throws ConcurrencyConflict when anyone wrote first.
   */
  async save(current: StoredOrder, next: OrderState): Promise<StoredOrder> {
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

    const actions: TransactionAction[] = [
      ['update', withIndexEtag(stateToRow(next), indexEtag), 'Replace', { etag: current.etags.state }],
    ];
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
    let response;
    try {
      response = await this.orders.submitTransaction(actions);
    } catch (e) {
      const status = httpStatusOf(e);
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
    };

    // The second put changes the row's ETag: the state row's copy is then stale, and the
    // finishing save takes the careful path (read, check, delete) for this run.
    if (reopening) await this.index.put(orderId, next.completeBy ?? new Date(), next.updatedAt);
    if (finishing) await this.index.removeAsWritten(orderId, indexEtag).catch(() => undefined); // the sweep repairs
    return stored;
  }

  /**
   * Load, decide, save; on a concurrent write, load and decide again (bounded, with a short
   * back-off). `decide` may throw (a TransitionRefused, say): that ends the attempt and surfaces.
   */
  async applyWithRetry(
    orderId: string,
    decide: (current: StoredOrder) => Decision,
  ): Promise<{ stored: StoredOrder; decision: Decision; conflicts: number }> {
    // Not a transient-fault retry (cockatiel's job, and cockatiel 4 is ESM-only anyway): each
    // round re-reads newer state and decides afresh, so the loop is the optimistic-concurrency
    // protocol itself. Bounded, with a little jitter so two losers do not collide again.
    for (let conflicts = 0; ; conflicts++) {
      const current = await this.load(orderId);
      if (current === null) throw new OrderNotFound(orderId);
      const decision = decide(current);
      try {
        const stored = await this.save(current, decision.state);
        return { stored, decision, conflicts };
      } catch (e) {
        if (!(e instanceof ConcurrencyConflict)) throw e;
        if (conflicts + 1 >= this.maxConflictAttempts) throw new TooManyConflicts(orderId, conflicts + 1);
        await new Promise((r) => setTimeout(r, Math.random() * 20 * (conflicts + 1)));
      }
    }
  }

  /**
   * Operator listing by process state, newest partitions in key order. Pages can come back empty
   * with a continuation token (the service stops after 5 s or a partition range); this keeps
   * reading until it has pageSize items, runs out, or has read maxRequests pages, and then
   * returns the token. The filter is on a non-key property, so the service scans: an operator
   * tool, not a hot path.
   */
  async listOrdersByState(
    state: ProcessState,
    continuationToken?: string,
    pageSize = 50,
    maxRequests = 20,
  ): Promise<Page<OrderSummary>> {
    if (!processStates.includes(state)) throw new RangeError(`unknown process state ${String(state)}`);
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000) {
      throw new RangeError('pageSize must be 1..1000');
    }
    const items: OrderSummary[] = [];
    let token = continuationToken;
    for (let request = 0; request < maxRequests && items.length < pageSize; request++) {
      const pages = this.orders
        .listEntities<Record<string, unknown>>({
          queryOptions: { filter: odata`RowKey eq ${stateRowKey} and ProcessState eq ${state}` },
        })
        .byPage({ maxPageSize: pageSize - items.length, continuationToken: token });
      const { value, done } = await pages.next();
      if (done || !value) {
        token = undefined;
        break;
      }
      this.metrics.entitiesRead += value.length;
      for (const row of value) {
        const { steps: _steps, ...summary } = rowToState(row as Row, []);
        items.push(summary);
      }
      token = value.continuationToken;
      if (!token) break;
    }
    return token ? { items, continuationToken: token } : { items };
  }

  private async getRow(orderId: string, rowKey: string): Promise<Row | null> {
    try {
      const row = await this.orders.getEntity<Record<string, unknown>>(orderId, rowKey);
      this.metrics.entitiesRead += 1;
      return row as Row;
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      throw e;
    }
  }
}

/** The state row with the ETag of the order's index row as last written by its own put. */
function withIndexEtag<T extends object>(row: T, indexEtag: string | undefined): T {
  return indexEtag === undefined ? row : { ...row, IndexETag: indexEtag };
}
