import {
  decide,
  makePolicy,
  orderWorkflow,
  type Decision,
  type OrderEvent,
  type OrderState,
} from '../../shared/domain/index.js';

export const policy = makePolicy({
  stepTimeoutSeconds: 60,
  claimTimeoutSeconds: 30,
  failureSoftThreshold: 2,
  failureHardThreshold: 4,
  extendedBackoffSeconds: 300,
});

export const orderId = '3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b';
export const t0 = new Date('2030-01-01T00:00:00.000Z');
export const at = (seconds: number): Date => new Date(t0.getTime() + seconds * 1000);

export function apply(state: OrderState | null, event: OrderEvent, now = t0): Decision {
  return decide(orderWorkflow, state, event, now, policy);
}

/** Walks an order through real transitions so every fixture is a state the engine can reach. */
export function fixtures(): Record<string, OrderState> {
  const pending = apply(null, { type: 'Submit', orderId }).state;
  const processing = apply(pending, { type: 'Claim', by: 'inv-1' }, at(1)).state;
  const compensating = apply(processing, { type: 'OperatorCancel', by: 'op' }, at(2)).state;
  const compensated = apply(
    compensating,
    { type: 'CompensationSucceeded', step: 'inventory', run: 1, attempt: 1 },
    at(3),
  ).state;
  const errored = apply(
    compensating,
    { type: 'CompensationFailed', step: 'inventory', run: 1, attempt: 1, error: 'boom' },
    at(3),
  ).state;
  let s = processing;
  for (const [i, step] of ['inventory', 'payment', 'shipping'].entries()) {
    s = apply(s, { type: 'StepSucceeded', step, run: 1, attempt: 1 }, at(2 + i)).state;
  }
  return {
    Pending: pending,
    Processing: processing,
    Compensating: compensating,
    Processed: s,
    Compensated: compensated,
    Error: errored,
  };
}

/** Deep-freezes a state so any accidental mutation by decide throws. */
export function frozen<T>(value: T): T {
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    Object.freeze(value);
    for (const v of Object.values(value)) frozen(v);
  }
  return value;
}
