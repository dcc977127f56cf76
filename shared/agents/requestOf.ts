import { dispatchMessageId } from '../domain/index.js';
import type { AgentRequestMessage } from '../messaging/contracts.js';

/** A request's order, step, attempt, kind and run: its log and span fields. */
export function requestFields(r: AgentRequestMessage) {
  return { orderId: r.orderId, step: r.step, attempt: r.attempt, kind: r.kind, run: r.run };
}

/** The request's id (its dispatch message id): the stem of every id its replies and waits take. */
export function requestIdOf(r: AgentRequestMessage): string {
  return dispatchMessageId(r.orderId, r.step, r.attempt, r.kind, r.run);
}

/** The order's customer (the share rule's unit); empty when the payload names none. */
export function customerOf(r: AgentRequestMessage): string {
  return typeof r.payload.customerId === 'string' ? r.payload.customerId : '';
}
