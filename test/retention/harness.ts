import { randomUUID } from 'node:crypto';
import { after, before } from 'node:test';
import { startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import { decide, historyEntryFor, orderWorkflow, type OrderEvent } from '../../shared/domain/index.js';
import { defaultRetention, type RetentionPolicy } from '../../shared/domain/retention.js';
import { Retention } from '../../shared/retention/retention.js';
import { StateStore, StoreMetrics, type StoredOrder } from '../../shared/stateStore/index.js';
import { newOrder, policy } from '../stateStore/harness.js';

/** Azurite with tables and blobs, and a store + retention on fresh tables and a fresh container. */
export async function startRetentionAzurite(): Promise<AzuriteInstance> {
  return startAzurite({ services: ['table', 'blob'] });
}

/**
 * Azurite (tables and blobs) for one test file: started before its tests, stopped after them. The
 * getter is read inside a test, once it has started.
 */
export function retentionAzurite(): () => AzuriteInstance {
  let azurite: AzuriteInstance | undefined;
  before(async () => {
    azurite = await startRetentionAzurite();
  });
  after(async () => {
    await azurite?.stop();
  });
  return () => {
    if (!azurite) throw new Error('Azurite is started before the tests: read it inside a test');
    return azurite;
  };
}

export async function withRetention(
  azurite: AzuriteInstance,
  over: Partial<RetentionPolicy> = {},
  options: Pick<Parameters<typeof Retention.open>[4] & object, 'liveWork' | 'pacing'> = {},
): Promise<{
  store: StateStore;
  retention: Retention;
  metrics: StoreMetrics;
  /** Another instance's Retention over the same tables and container (its own process state). */
  again: () => Promise<Retention>;
}> {
  const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
  const connection = { kind: 'connectionString' as const, connectionString: azurite.connectionString };
  const metrics = new StoreMetrics();
  const store = await StateStore.open(connection, {
    ordersTable: `Orders${suffix}`,
    inFlightTable: `InFlight${suffix}`,
    stateIndexTable: `OrderIndex${suffix}`,
    stateIndexPartitions: 4,
    metrics,
  });
  const open = () =>
    Retention.open(
      store,
      connection,
      { ...defaultRetention, purgeRatePerSecond: 1000, ...over },
      connection,
      { table: `Retention${suffix}`, container: `archive-${suffix}`, ...options },
    );
  const retention = await open();
  return { store, retention, metrics, again: open };
}

const day = 86_400_000;
export const daysAfter = (at: Date, days: number): Date => new Date(at.getTime() + days * day);

async function apply(store: StateStore, s: StoredOrder, event: OrderEvent, now: Date): Promise<StoredOrder> {
  const d = decide(orderWorkflow, s.state, event, now, policy);
  return store.save(s, d.state, historyEntryFor(event, s.state, d.state, now, d.state.workflowVersion));
}

/** An order submitted at `at` and taken to `to` (Processed, Compensated) or left Pending/Processing. */
export async function orderIn(
  store: StateStore,
  to: 'Pending' | 'Processing' | 'Processed' | 'Compensated',
  at: Date,
  orderId: string = randomUUID(),
): Promise<StoredOrder> {
  const submit: OrderEvent = { type: 'Submit', orderId };
  const d = decide(orderWorkflow, null, submit, at, policy);
  let s = await store.submit(newOrder(orderId), d.state, {
    history: historyEntryFor(submit, null, d.state, at, d.state.workflowVersion),
  });
  if (to === 'Pending') return s;
  s = await apply(store, s, { type: 'Claim', by: 'inv-1' }, new Date(at.getTime() + 1));
  if (to === 'Processing') return s;
  if (to === 'Compensated') {
    s = await apply(store, s, { type: 'OperatorCancel', by: 'op' }, new Date(at.getTime() + 2));
    return apply(
      store,
      s,
      { type: 'CompensationSucceeded', step: 'inventory', run: 1, attempt: 1 },
      new Date(at.getTime() + 3),
    );
  }
  for (const [i, step] of ['inventory', 'payment', 'shipping'].entries()) {
    s = await apply(
      store,
      s,
      { type: 'StepSucceeded', step, run: 1, attempt: 1 },
      new Date(at.getTime() + 2 + i),
    );
  }
  return s;
}

/** Every row of an order's partition, by RowKey. */
export async function partitionKeys(store: StateStore, orderId: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const r of store.orders.listEntities({
    queryOptions: { filter: `PartitionKey eq '${orderId}'`, select: ['RowKey'] },
  })) {
    keys.push(String(r.rowKey));
  }
  return keys.sort();
}

/** Every index entry of the state index (groups and counters), for "nothing points at nothing". */
export async function indexGuards(store: StateStore): Promise<{ orderId: string; state: string }[]> {
  const out: { orderId: string; state: string }[] = [];
  for await (const r of store.stateIndex.table.listEntities<Record<string, unknown>>()) {
    if (String(r.rowKey).startsWith('a:'))
      out.push({ orderId: String(r.OrderId), state: String(r.ProcessState) });
  }
  return out;
}
