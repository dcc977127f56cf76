import { randomUUID } from 'node:crypto';
import type { TransactionAction } from '@azure/data-tables';
import { decide, orderWorkflow } from '../shared/domain/index.js';
import { pool, processedState, seedOrder, seedPolicy } from './seedOrders.js';
import { indexEntries, StateStore, StoreMetrics, type IndexFilter } from '../shared/stateStore/index.js';
import { stateToRow } from '../shared/stateStore/rows.js';

/**
 * The operator's list must cost O(page), not O(orders): entities read (and requests) for one
 * page, with few and with many terminal orders. In-flight orders go through the real store; the
 * terminal ones are seeded directly (state-index entries in batches, and the state rows of the
 * newest 1,000), as the app leaves them. An entry without its state row would be hidden, so a full
 * page (items = pageSize) shows that every entry a page read was confirmed.
 */
/** State rows seeded among the many terminal orders: the newest, what the first pages read. */
const stateRowsForNewest = 1000;

export interface PageFigures {
  list: string;
  terminal: number;
  items: number;
  entitiesRead: number;
  requests: number;
  tableScans: number;
}

export interface ListScalingResult {
  pageSize: number;
  small: PageFigures[];
  large: PageFigures[];
  /** Worst large/small entities-read ratio over the lists measured (must be <= 1.5). */
  worstRatio: number;
  seedMs: number;
}

const lists: Array<{ list: string; filter: IndexFilter }> = [
  { list: 'Pending', filter: { state: 'Pending' } },
  { list: 'Processed', filter: { state: 'Processed' } },
  { list: 'Processed, one customer', filter: { state: 'Processed', customerId: 'bench-c0' } },
  { list: 'Processed, version 1', filter: { state: 'Processed', workflowVersion: 1 } },
];

async function measure(
  store: StateStore,
  metrics: StoreMetrics,
  terminal: number,
  pageSize: number,
): Promise<PageFigures[]> {
  const out: PageFigures[] = [];
  for (const { list, filter } of lists) {
    metrics.reset();
    const page = await store.listOrders(filter, undefined, pageSize);
    out.push({
      list,
      terminal,
      items: page.items.length,
      entitiesRead: metrics.entitiesRead,
      requests: metrics.requests,
      tableScans: metrics.tableScans,
    });
  }
  return out;
}

export async function measureListScaling(
  connectionString: string,
  options: { small: number; large: number; inFlight?: number; pageSize?: number; seedConcurrency?: number },
): Promise<ListScalingResult> {
  const metrics = new StoreMetrics();
  const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
  const store = await StateStore.open(
    { kind: 'connectionString', connectionString },
    {
      ordersTable: `ListOrders${suffix}`,
      inFlightTable: `ListInFlight${suffix}`,
      stateIndexTable: `ListIndex${suffix}`,
      metrics,
    },
  );
  const pageSize = options.pageSize ?? 50;
  const conc = options.seedConcurrency ?? 16;
  const now = new Date();

  await pool(options.inFlight ?? 100, conc, async () => {
    const order = seedOrder(now, 'bench-live');
    const initial = decide(
      orderWorkflow,
      null,
      { type: 'Submit', orderId: order.orderId },
      now,
      seedPolicy,
    ).state;
    await store.submit(order, initial);
  });

  let seeded = 0;
  let seedMs = 0;
  const seedTo = async (total: number) => {
    const t0 = performance.now();
    const batch = 25; // 4 index entries each: 100 operations, one entity-group transaction
    const batches = Math.ceil((total - seeded) / batch);
    const base = seeded;
    await pool(batches, conc, async (b) => {
      const count = Math.min(batch, total - base - b * batch);
      // Each order's entries go to its own partition of the state (the spread state index).
      const byPartition = new Map<string, TransactionAction[]>();
      for (let i = 0; i < count; i++) {
        const n = base + b * batch + i;
        const at = new Date(now.getTime() - 86_400_000 + n); // older than the live orders
        const order = seedOrder(at, `bench-c${n % 2}`);
        const state = processedState(order.orderId, at);
        // One insert per order (each its own partition) is what makes seeding slow: state rows go
        // in only for the orders a first page can show (the newest), every index entry goes in.
        if (n < options.small || n >= options.large - stateRowsForNewest) {
          await store.orders.createEntity({ ...stateToRow(state), StateSince: at });
        }
        const partitionKey = store.stateIndex.layout.partitionFor('Processed', order.orderId);
        const entries = byPartition.get(partitionKey) ?? [];
        for (const e of indexEntries(
          {
            orderId: order.orderId,
            state: 'Processed',
            since: at,
            customerId: order.customerId,
            workflow: state.workflow,
            workflowVersion: 1,
          },
          partitionKey,
        )) {
          entries.push(['create', e as { partitionKey: string; rowKey: string }]);
        }
        byPartition.set(partitionKey, entries);
      }
      await Promise.all(
        [...byPartition.values()].map((entries) => store.stateIndex.table.submitTransaction(entries)),
      );
    });
    seeded = total;
    seedMs += performance.now() - t0;
  };

  await seedTo(options.small);
  const small = await measure(store, metrics, options.small, pageSize);
  await seedTo(options.large);
  const large = await measure(store, metrics, options.large, pageSize);

  await Promise.all([
    store.orders.deleteTable().catch(() => undefined),
    store.index.table.deleteTable().catch(() => undefined),
    store.stateIndex.table.deleteTable().catch(() => undefined),
  ]);
  const worstRatio = Math.max(...large.map((l, i) => l.entitiesRead / Math.max(1, small[i].entitiesRead)));
  return { pageSize, small, large, worstRatio, seedMs };
}
