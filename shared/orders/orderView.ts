import type { Order, OrderState } from '../domain/index.js';

/** What GET /api/orders/{orderId} answers: the recorded process state, step by step. */
export function orderView(order: Order | undefined, state: OrderState) {
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  return {
    orderId: state.orderId,
    processState: state.processState,
    failureCount: state.failureCount,
    completeBy: iso(state.completeBy),
    lockedBy: state.lockedBy,
    run: state.run,
    compensationReason: state.compensationReason,
    error: state.errorCode ? { code: state.errorCode, detail: state.errorDetail } : null,
    createdAt: iso(state.createdAt),
    updatedAt: iso(state.updatedAt),
    ...(order
      ? { customerId: order.customerId, items: order.items, shippingAddress: order.shippingAddress }
      : {}),
    steps: state.steps.map((s) => ({
      name: s.name,
      status: s.status,
      attempt: s.attempt,
      compensationAttempt: s.compensationAttempt,
      lastError: s.lastError,
      completeBy: iso(s.completeBy),
      startedAt: iso(s.startedAt),
      completedAt: iso(s.completedAt),
      compensatedAt: iso(s.compensatedAt),
    })),
  };
}

/** One line of the operator's list. */
export function orderSummary(state: Omit<OrderState, 'steps'>) {
  return {
    orderId: state.orderId,
    processState: state.processState,
    failureCount: state.failureCount,
    error: state.errorCode ? { code: state.errorCode, detail: state.errorDetail } : null,
    updatedAt: state.updatedAt.toISOString(),
  };
}
