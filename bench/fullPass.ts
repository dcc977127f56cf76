import { decide, historyEntryFor, orderWorkflow, type OrderEvent } from '../shared/domain/index.js';
import { ConcurrencyConflict, type ReconcileCursor, type StateStore } from '../shared/stateStore/index.js';
import { fullRepairBudget } from '../shared/supervisor/repairBudget.js';
import { pool, seedOrder, seedPolicy } from './seedOrders.js';

const day = 86_400_000;

/** One order written through the store as if it ended Processed `at` (history, groups and all). */
export async function finishedOrder(store: StateStore, at: Date): Promise<void> {
  const order = { ...seedOrder(at, 'bench-retention'), requestHash: 'h' };
  const apply = async (s: Awaited<ReturnType<StateStore['submit']>>, e: OrderEvent, t: Date) => {
    const d = decide(orderWorkflow, s.state, e, t, seedPolicy);
    return store.save(s, d.state, historyEntryFor(e, s.state, d.state, t, d.state.workflowVersion));
  };
  const submit: OrderEvent = { type: 'Submit', orderId: order.orderId };
  const d = decide(orderWorkflow, null, submit, at, seedPolicy);
  let s = await store.submit(order, d.state, {
    history: historyEntryFor(submit, null, d.state, at, d.state.workflowVersion),
  });
  s = await apply(s, { type: 'Claim', by: 'bench' }, at);
  for (const step of orderWorkflow.steps) {
    s = await apply(s, { type: 'StepSucceeded', step: step.name, run: 1, attempt: 1 }, at);
  }
}

/**
 * `n` orders that finished three days ago; the time it took in ms. On a running stack the
 * Supervisor may take up an order while it is being written (its deadline is days past): that one
 * is left to it.
 */
export async function seedFinished(store: StateStore, n: number): Promise<number> {
  const at = new Date(Date.now() - 3 * day);
  const t0 = performance.now();
  await pool(n, 16, (i) =>
    finishedOrder(store, new Date(at.getTime() + i)).catch((e: unknown) => {
      if (!(e instanceof ConcurrencyConflict)) throw e;
    }),
  );
  return performance.now() - t0;
}

export interface FullPassFigures {
  retained: number;
  rows: number;
  pages: number;
  wallMs: number;
  orderRowsPerSecond: number;
  entriesPerSecond: number;
  /** Retained orders the pass covered per second of its own work. */
  ordersPerSecond: number;
  /** Retained orders per second as the Supervisor spreads the pass (fullRepairBudget per run). */
  supervisorOrdersPerSecond: number;
  atTenMillion: { wallHours: number; supervisorHours: number };
}

/**
 * One daily full pass over `retained` orders as the Supervisor runs it (StateStore.reconcilePage,
 * the full pass's page size), timed per stage, and what it takes at 10 million retained orders:
 * in work, and spread over 30-s Supervisor runs that each give it fullRepairBudget (its pages or
 * its wall time, whichever ends first).
 */
export async function fullPassFigures(store: StateStore, retained: number): Promise<FullPassFigures> {
  const budget = fullRepairBudget;
  const t0 = performance.now();
  let cursor: ReconcileCursor | null = { stage: 'orders', full: true };
  let pages = 0;
  let rows = 0;
  let orderRowsMs = 0;
  let entriesMs = 0;
  while (cursor) {
    const p0 = performance.now();
    const r = await store.reconcilePage(cursor, budget.pageSize);
    const ms = performance.now() - p0;
    if (cursor.stage === 'orders') orderRowsMs += ms;
    else entriesMs += ms;
    rows += r.scanned;
    pages += 1;
    cursor = r.next;
  }
  const wallMs = performance.now() - t0;
  const target = 10_000_000;
  const msPerOrder = wallMs / retained;
  const rowsPerOrder = rows / retained;
  // A run ends the pass's share at its page count or its wall time, whichever comes first.
  const ordersPerRun = Math.min(
    (budget.pagesPerRun * budget.pageSize) / rowsPerOrder,
    budget.budgetMs / msPerOrder,
  );
  const supervisorOrdersPerSecond = ordersPerRun / 30;
  return {
    retained,
    rows,
    pages,
    wallMs,
    orderRowsPerSecond: (retained / orderRowsMs) * 1000,
    entriesPerSecond: ((rows - retained) / Math.max(1, entriesMs)) * 1000,
    ordersPerSecond: (retained / wallMs) * 1000,
    supervisorOrdersPerSecond,
    atTenMillion: {
      wallHours: (msPerOrder * target) / 1000 / 3600,
      supervisorHours: target / supervisorOrdersPerSecond / 3600,
    },
  };
}
