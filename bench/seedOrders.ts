import { randomUUID } from 'node:crypto';
import { decide, makePolicy, orderWorkflow, type Order, type OrderState } from '../shared/domain/index.js';
import { mapPooled } from '../shared/stateStore/pooled.js';

/**
 * What the scaling benches seed straight into their tables: orders and their states walked
 * through the real transitions in memory, so the rows are the ones the app would leave.
 */
export const seedPolicy = makePolicy({
  stepTimeoutSeconds: 60,
  failureSoftThreshold: 3,
  failureHardThreshold: 5,
  extendedBackoffSeconds: 10,
});

export function seedOrder(now: Date, customerId: string): Order {
  return {
    orderId: randomUUID(),
    customerId,
    items: [{ sku: 'SKU-1', quantity: 1, unitPrice: 1 }],
    shippingAddress: { name: 'B', line1: '1 Main St', city: 'Berlin', postalCode: '10115', country: 'DE' },
    createdAt: now,
  };
}

/** A Processed order's state. */
export function processedState(orderId: string, t: Date): OrderState {
  let s = decide(orderWorkflow, null, { type: 'Submit', orderId }, t, seedPolicy).state;
  s = decide(orderWorkflow, s, { type: 'Claim', by: 'bench' }, t, seedPolicy).state;
  for (const step of orderWorkflow.steps) {
    s = decide(
      orderWorkflow,
      s,
      { type: 'StepSucceeded', step: step.name, run: 1, attempt: 1 },
      t,
      seedPolicy,
    ).state;
  }
  if (s.processState !== 'Processed') throw new Error(`seed: expected Processed, got ${s.processState}`);
  return s;
}

/** Runs `total` jobs over `concurrency` workers (seeding without flooding Azurite). */
export async function pool(
  total: number,
  concurrency: number,
  job: (i: number) => Promise<void>,
): Promise<void> {
  await mapPooled(
    Array.from({ length: total }, (_, i) => i),
    concurrency,
    job,
  );
}
