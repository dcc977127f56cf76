import { randomUUID } from 'node:crypto';
import { startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import { decide, makePolicy, orderWorkflow, type Order, type OrderEvent } from '../../shared/domain/index.js';
import { InFlightIndex, StateStore, StoreMetrics, type StoredOrder } from '../../shared/stateStore/index.js';

export const policy = makePolicy({
  stepTimeoutSeconds: 60,
  claimTimeoutSeconds: 30,
  failureSoftThreshold: 2,
  failureHardThreshold: 4,
  extendedBackoffSeconds: 300,
});
export const t0 = new Date('2030-01-01T00:00:00.000Z');
export const at = (seconds: number): Date => new Date(t0.getTime() + seconds * 1000);

export async function withStore(): Promise<{
  azurite: AzuriteInstance;
  store: StateStore;
  metrics: StoreMetrics;
}> {
  const azurite = await startAzurite({ services: ['table'] });
  const metrics = new StoreMetrics();
  const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
  const store = await StateStore.open(
    { kind: 'connectionString', connectionString: azurite.connectionString },
    {
      ordersTable: `Orders${suffix}`,
      inFlightTable: `InFlight${suffix}`,
      stateIndexTable: `OrderIndex${suffix}`,
      metrics,
    },
  );
  return { azurite, store, metrics };
}

export function newOrder(orderId: string = randomUUID(), requestHash = 'h1'): Order {
  return {
    orderId,
    customerId: 'c-1',
    items: [{ sku: 'SKU-1', quantity: 2, unitPrice: 9.99 }],
    shippingAddress: { name: 'A', line1: 'Main St 1', city: 'Berlin', postalCode: '10115', country: 'DE' },
    requestHash,
    createdAt: t0,
  };
}

export async function submitNew(
  store: StateStore,
  now = t0,
  orderId: string = randomUUID(),
): Promise<StoredOrder> {
  const d = decide(orderWorkflow, null, { type: 'Submit', orderId }, now, policy);
  return store.submit(newOrder(orderId), d.state);
}

export async function step(
  store: StateStore,
  current: StoredOrder,
  event: OrderEvent,
  now: Date,
): Promise<StoredOrder> {
  const d = decide(orderWorkflow, current.state, event, now, policy);
  return store.save(current, d.state);
}

/** Runs tasks with bounded parallelism (seeding many orders without flooding Azurite). */
export async function pool<T>(n: number, width: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await task(i);
      }
    }),
  );
  return out;
}

/** Whether the in-flight index holds a row for the order (read straight from its table). */
export async function indexHas(index: InFlightIndex, orderId: string): Promise<boolean> {
  try {
    await index.table.getEntity(InFlightIndex.partitionFor(orderId), orderId);
    return true;
  } catch (e) {
    if ((e as { statusCode?: number }).statusCode === 404) return false;
    throw e;
  }
}
