import { dispatchCommand } from './commandFactory.js';
import type { OrderState } from './state.js';
import { workflowOf, type Workflows } from './workflowVersions.js';

/**
 * "The request was never picked up" is not "the Agent ran out of time". A request can wait in a
 * busy Agent's queue past its complete-by; the Agent that reads it then has not started anything,
 * says so (a `not-started` reply), and the Supervisor retries the step without spending the
 * failure budget. These are the rules; the Agent and the Supervisor only gather the facts.
 */

/** Below this much time left an Agent never starts a call: it reports the request not started. */
export const startMarginMs = 500;

/**
 * The time left below which an Agent does not start a request: how long its recent calls took
 * (the 90th percentile, so a busy Agent that would be cut off at complete-by says "not started"
 * instead of timing out), at least `startMarginMs`, and at most half the request's window, so a
 * request read as soon as it was sent always starts: the Agent cannot refuse everything.
 */
export function startMarginFor(recentCallsMs: readonly number[], windowMs: number | undefined): number {
  const sorted = recentCallsMs.filter((d) => Number.isFinite(d) && d >= 0).sort((a, b) => a - b);
  const p90 = sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.9))];
  const cap = windowMs !== undefined && Number.isFinite(windowMs) ? windowMs / 2 : startMarginMs;
  return Math.max(startMarginMs, Math.min(p90, cap));
}

/**
 * How long an unread request stays on the Agent's queue after its complete-by, so the Agent still
 * reads it and answers `not-started` instead of the broker dropping it silently. The duplicate
 * detection window (5 min): longer is pointless, a retry of the step has a new id by then.
 */
export const unreadRequestGraceMs = 300_000;

/** Whether an Agent reading a request now can still start it before its complete-by. */
export function canStart(now: Date, completeBy: Date, marginMs = startMarginMs): boolean {
  return completeBy.getTime() - now.getTime() > marginMs;
}

/**
 * Only the first delivery of a request is known never to have started: a redelivery may follow an
 * invocation that called the service and lost its lock, and then the timeout is genuine.
 */
export function reportsNotStarted(
  now: Date,
  completeBy: Date,
  deliveryCount: number | undefined,
  marginMs = startMarginMs,
): boolean {
  return !canStart(now, completeBy, marginMs) && (deliveryCount === undefined || deliveryCount <= 1);
}

/** The time to live of an Agent request: its complete-by plus the unread grace. */
export function requestTimeToLiveMs(now: Date, completeBy: Date): number {
  return Math.max(1000, completeBy.getTime() - now.getTime() + unreadRequestGraceMs);
}

export function notStartedReplyId(requestId: string): string {
  return `${requestId}:not-started`;
}

/** The Agent request the order waits on (a running step or an undo), if any. */
export function outstandingRequest(
  workflows: Workflows,
  state: OrderState,
): { agentQueue: string; messageId: string } | undefined {
  const workflow = workflowOf(workflows, state);
  // A version no longer held has no request to wait for: the timeout moves the order to Error.
  if (!workflow) return undefined;
  const kind = state.processState === 'Processing' ? 'do' : 'compensate';
  if (state.processState !== 'Processing' && state.processState !== 'Compensating') return undefined;
  const i = state.steps.findIndex((s) => s.status === (kind === 'do' ? 'Running' : 'Compensating'));
  if (i < 0 || state.steps[i].completeBy === null) return undefined;
  const command = dispatchCommand(workflow, state, i, kind, 0);
  return { agentQueue: command.agentQueue, messageId: command.messageId };
}

/** What one sweep saw of a queue. */
export interface QueueView {
  /** Message ids waiting or being handled (scheduled ones aside). */
  waiting: ReadonlySet<string>;
  /** False when the peek stopped before the queue's end: an id not seen may still be there. */
  complete: boolean;
  /**
   * Whether the queue is consumed: empty, or its head changed within a claim timeout. A head that
   * stays is a dead consumer, and nothing waits on it any more, so a dead Agent still ends orders.
   */
  moving: boolean;
}

/**
 * Whether a step past its complete-by may still hear "not started": its request is unread on a
 * queue the Agent consumes, or the Agent's not-started reply waits for the Scheduler. Then the
 * timeout waits for a later sweep. Unknown (no view, or a queue nobody consumes) is a timeout.
 */
export function awaitsNotStarted(
  requestId: string,
  agentQueue: QueueView | undefined,
  schedulerQueue: QueueView | undefined,
): boolean {
  const mayHold = (view: QueueView | undefined, id: string) =>
    view !== undefined && view.moving && (view.waiting.has(id) || !view.complete);
  return mayHold(agentQueue, requestId) || mayHold(schedulerQueue, notStartedReplyId(requestId));
}
