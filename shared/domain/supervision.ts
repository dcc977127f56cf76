import type { Policy } from './policy.js';
import type { OrderState } from './state.js';

/**
 * The Supervisor's rules, in one place: when an order is overdue, what a timeout leads to, and
 * when an order owes its operator alert. The state store's sweep, the transition function and
 * the Supervisor function apply them; none of them holds a rule of its own.
 */

/** An order (or one of its steps) is overdue once its complete-by has passed. */
export function isOverdue(completeBy: Date | null, now: Date): boolean {
  return completeBy !== null && completeBy.getTime() < now.getTime();
}

/** What the Supervisor makes of a count of silent timeouts. */
export type TimeoutVerdict = { kind: 'retry'; delaySeconds: number } | { kind: 'give-up' };

/**
 * Retry at once below the soft threshold, after the extended back-off from it on, and give up at
 * the hard threshold (forward steps: Error, alert, compensation; an undo: Error, alert).
 */
export function afterTimeouts(timeouts: number, policy: Policy): TimeoutVerdict {
  if (timeouts >= policy.failureHardThreshold) return { kind: 'give-up' };
  return { kind: 'retry', delaySeconds: backoffSeconds(timeouts, policy) };
}

/**
 * A stalled attempt (the service could not answer) says nothing about the order: retried without
 * limit, backing off once stalls repeat, until the service recovers or an operator acts.
 */
export function backoffSeconds(count: number, policy: Policy): number {
  return count >= policy.failureSoftThreshold ? policy.extendedBackoffSeconds : 0;
}

/**
 * An order that gave up (or otherwise heads for Error) owes its operator alert with every later
 * move, not only with the write that gave up: if the process died between that write and its
 * sends, nothing else would carry the alert. Its message id is deterministic, so duplicate
 * detection drops the copies that did go out.
 */
export function owesOperatorAlert(state: OrderState): boolean {
  return (
    state.errorCode !== null && (state.processState === 'Error' || state.processState === 'Compensating')
  );
}
