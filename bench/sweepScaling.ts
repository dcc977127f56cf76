import { randomUUID } from 'node:crypto';
import type { TransactionAction } from '@azure/data-tables';
import { decide, orderWorkflow } from '../shared/domain/index.js';
import { pool, processedState, seedOrder, seedPolicy } from './seedOrders.js';
import { StateStore, StoreMetrics, type ReconcileCursor } from '../shared/stateStore/index.js';
import { orderToRow, stateToRow, stepToRow } from '../shared/stateStore/rows.js';
import { summarize, type LatencySummary } from './stats.js';

/**
 * Part 3: the Supervisor's sweep must cost O(in-flight), not O(history). Seeds a private pair of
 * tables (directly, not through the counting proxies) with in-flight orders whose complete-by
 * has passed, measures the sweep, adds many terminal orders, measures again. Also measures the
 * hourly index reconciliation, which is O(history) by design.
 */
export interface SweepFigures {
  inFlight: number;
  terminal: number;
  duration: LatencySummary;
  entitiesRead: number;
  requests: number;
  timedOut: number;
}

export interface SweepScalingResult {
  alone: SweepFigures;
  withHistory: SweepFigures;
  durationRatio: number;
  entitiesReadRatio: number;
  seedMs: number;
  reconcile: { terminal: number; ms: number; requests: number; entitiesRead: number; pagesLimit: number };
}

async function measureSweep(
  store: StoreMetricsStore,
  inFlight: number,
  terminal: number,
  repeats: number,
): Promise<SweepFigures> {
  const durations: number[] = [];
  let entitiesRead = 0;
  let requests = 0;
  let timedOut = 0;
  for (let i = 0; i < repeats; i++) {
    store.metrics.reset();
    const t0 = performance.now();
    const r = await store.store.index.sweep(new Date());
    durations.push(performance.now() - t0);
    entitiesRead = store.metrics.entitiesRead;
    requests = store.metrics.requests;
    timedOut = r.timedOut.length;
  }
  return { inFlight, terminal, duration: summarize(durations), entitiesRead, requests, timedOut };
}

interface StoreMetricsStore {
  store: StateStore;
  metrics: StoreMetrics;
}

export async function measureSweepScaling(
  connectionString: string,
  options: { inFlight: number; terminal: number; repeats: number; seedConcurrency?: number },
): Promise<SweepScalingResult> {
  const metrics = new StoreMetrics();
  const suffix = randomUUID().slice(0, 8);
  const store = await StateStore.open(
    { kind: 'connectionString', connectionString },
    { ordersTable: `SweepOrders${suffix}`, inFlightTable: `SweepInFlight${suffix}`, metrics },
  );
  const s = { store, metrics };
  const past = new Date(Date.now() - 3_600_000);
  const conc = options.seedConcurrency ?? 16;

  // In flight: Processing, claimed an hour ago, so complete-by has passed and the sweep reports them.
  await pool(options.inFlight, conc, async () => {
    const order = seedOrder(past, 'bench-sweep');
    const initial = decide(
      orderWorkflow,
      null,
      { type: 'Submit', orderId: order.orderId },
      past,
      seedPolicy,
    ).state;
    await store.submit(order, initial);
    await store.applyWithRetry(order.orderId, (cur) =>
      decide(orderWorkflow, cur.state, { type: 'Claim', by: 'bench' }, past, seedPolicy),
    );
  });
  const alone = await measureSweep(s, options.inFlight, 0, options.repeats);

  // History: terminal orders as the app leaves them (five rows in their partition, no index row).
  const t0 = performance.now();
  await pool(options.terminal, conc, async () => {
    const order = seedOrder(past, 'bench-sweep');
    const state = processedState(order.orderId, past);
    const actions: TransactionAction[] = [
      ['create', orderToRow(order, { name: state.workflow, version: state.workflowVersion })],
      // StateSince: a row written since the state index (the hourly pass backfills only older ones).
      ['create', { ...stateToRow(state), StateSince: state.updatedAt }],
      ...state.steps.map((st, i): TransactionAction => ['create', stepToRow(order.orderId, i, st)]),
    ];
    await store.orders.submitTransaction(actions);
  });
  const seedMs = performance.now() - t0;
  const withHistory = await measureSweep(s, options.inFlight, options.terminal, options.repeats);

  // The hourly reconciliation (functions/supervisor.ts: at most 100 pages of 1,000 rows).
  metrics.reset();
  const r0 = performance.now();
  let cursor: ReconcileCursor | null = { stage: 'orders' };
  for (let page = 0; cursor && page < 100; page++) cursor = (await store.reconcilePage(cursor)).next;
  const reconcile = {
    terminal: options.terminal,
    ms: performance.now() - r0,
    requests: metrics.requests,
    entitiesRead: metrics.entitiesRead,
    pagesLimit: 100,
  };

  await store.orders.deleteTable().catch(() => undefined);
  await store.index.table.deleteTable().catch(() => undefined);
  return {
    alone,
    withHistory,
    durationRatio: withHistory.duration.p50 / alone.duration.p50,
    entitiesReadRatio: withHistory.entitiesRead / alone.entitiesRead,
    seedMs,
    reconcile,
  };
}
