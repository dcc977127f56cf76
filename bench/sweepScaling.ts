/**
 * How the Supervisor's sweep cost grows: 100 in-flight orders alone, then the same 100 plus
 * 10,000 terminal orders, against Azurite. Counts requests and entities read by instrumenting
 * the SDK clients (StoreMetrics policy), and wall time. For contrast it also times the naive
 * sweep, a filter on the Orders table, which the service answers by scanning every row.
 *
 * Usage: npm run build && node dist/bench/sweepScaling.js [terminalCount]
 */
import { randomUUID } from 'node:crypto';
import { odata } from '@azure/data-tables';
import { startAzurite } from '../local/azurite.js';
import { decide, makePolicy, orderWorkflow, type Order } from '../shared/domain/index.js';
import { StateStore, StoreMetrics, type StoredOrder } from '../shared/stateStore/index.js';

const policy = makePolicy({
  stepTimeoutSeconds: 60,
  failureSoftThreshold: 3,
  failureHardThreshold: 5,
  extendedBackoffSeconds: 120,
});
const t0 = new Date('2030-01-01T00:00:00Z');
const at = (s: number): Date => new Date(t0.getTime() + s * 1000);

function order(orderId: string): Order {
  return {
    orderId,
    customerId: 'bench',
    items: [{ sku: 'SKU', quantity: 1, unitPrice: 1 }],
    shippingAddress: { name: 'n', line1: 'l', city: 'c', postalCode: 'p', country: 'DE' },
    createdAt: t0,
  };
}

async function pool(n: number, width: number, task: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await task(next++);
    }),
  );
}

async function apply(store: StateStore, s: StoredOrder, e: Parameters<typeof decide>[2], now: Date) {
  return store.save(s, decide(orderWorkflow, s.state, e, now, policy).state);
}

async function inFlight(store: StateStore): Promise<void> {
  const id = randomUUID();
  const s = await store.submit(
    order(id),
    decide(orderWorkflow, null, { type: 'Submit', orderId: id }, t0, policy).state,
  );
  await apply(store, s, { type: 'Claim', by: 'bench' }, at(1)); // complete-by 61 s
}

async function terminal(store: StateStore): Promise<void> {
  const id = randomUUID();
  let s = await store.submit(
    order(id),
    decide(orderWorkflow, null, { type: 'Submit', orderId: id }, t0, policy).state,
  );
  s = await apply(store, s, { type: 'Claim', by: 'bench' }, at(1));
  await apply(
    store,
    s,
    { type: 'StepFailedPermanently', step: 'inventory', run: 1, attempt: 1, error: 'x' },
    at(2),
  );
}

async function measure(store: StateStore, metrics: StoreMetrics, label: string): Promise<void> {
  const rounds = 3;
  for (let r = 0; r < rounds; r++) {
    metrics.reset();
    const start = performance.now();
    const result = await store.index.sweep(at(100)); // every in-flight order has expired by then
    const ms = performance.now() - start;
    const m = metrics.snapshot();
    console.log(
      `${label} sweep#${r + 1}: timedOut=${result.timedOut.length} examined=${result.examined} ` +
        `entitiesRead=${m.entitiesRead} requests=${m.requests} wall=${ms.toFixed(0)}ms`,
    );
  }
  metrics.reset();
  const start = performance.now();
  let found = 0;
  const naive = store.orders.listEntities({
    queryOptions: {
      filter: odata`RowKey eq 'state' and ProcessState eq 'Processing' and CompleteBy lt ${at(100)}`,
    },
  });
  for await (const page of naive.byPage({ maxPageSize: 1000 })) found += page.length;
  console.log(
    `${label} naive table scan (for contrast): found=${found} requests=${metrics.requests} ` +
      `wall=${(performance.now() - start).toFixed(0)}ms (the service reads every row of the Orders table)`,
  );
}

async function main(): Promise<void> {
  const terminalCount = Number(process.argv[2] ?? 10_000);
  const azurite = await startAzurite({ services: ['table'] });
  try {
    const metrics = new StoreMetrics();
    const store = await StateStore.open(
      { kind: 'connectionString', connectionString: azurite.connectionString },
      { metrics },
    );
    await pool(100, 16, () => inFlight(store));
    await measure(store, metrics, '[100 in-flight]');
    const seedStart = performance.now();
    await pool(terminalCount, 16, () => terminal(store));
    console.log(
      `seeded ${terminalCount} terminal orders in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`,
    );
    await measure(store, metrics, `[100 in-flight + ${terminalCount} terminal]`);
  } finally {
    await azurite.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
