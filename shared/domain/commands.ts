import type { ErrorCode, ProcessState } from './state.js';

/**
 * What the adapters must do after a transition has been written. Plain data with deterministic
 * message ids: sending one twice is absorbed by Service Bus duplicate detection.
 */
export interface DispatchStep {
  type: 'DispatchStep';
  orderId: string;
  run: number;
  step: string;
  /** Queue of the Agent. */
  agentQueue: string;
  action: string;
  kind: 'do' | 'compensate';
  attempt: number;
  /** The Agent stops silently after this; the message's TimeToLive ends here too. */
  completeBy: Date;
  /** Schedule the message this far in the future (backed-off compensation retries). */
  delaySeconds: number;
  /**
   * A callback step (waiting.ts): the Agent passes the step's callback URL, with a token valid until
   * this time (plus the route's grace), and waits for the service's 202, not its outcome.
   */
  callbackUntil?: Date;
  /** Sent to the remote service on every attempt of this call. */
  idempotencyKey: string;
  /** For a compensation: the key of the action being undone (what to refund, release...). */
  actionIdempotencyKey: string;
  messageId: string;
}

/** Why a process-order message was sent: every reason the engine produces, and no other. */
export const processOrderReasons = ['submitted', 'retry', 'backoff-retry', 'resubmitted'] as const;
export type ProcessOrderReason = (typeof processOrderReasons)[number];

/** Ask the Scheduler to claim a Pending order (a `process-order` message). */
export interface NotifyScheduler {
  type: 'NotifyScheduler';
  orderId: string;
  run: number;
  reason: ProcessOrderReason;
  delaySeconds: number;
  messageId: string;
}

export type StatusEventName =
  'received' | 'step-completed' | 'processed' | 'failed' | 'compensating' | 'compensated' | 'error';

export interface PublishStatus {
  type: 'PublishStatus';
  orderId: string;
  run: number;
  event: StatusEventName;
  processState: ProcessState;
  step?: string;
  detail?: string;
  at: Date;
  messageId: string;
}

export interface RaiseOperatorAlert {
  type: 'RaiseOperatorAlert';
  orderId: string;
  run: number;
  /** ApprovalEscalated: an approval is close to its complete-by (the order is fine). */
  code: ErrorCode | 'ApprovalEscalated';
  reason: string;
  processState: ProcessState;
  failureCount: number;
  at: Date;
  messageId: string;
}

export type Command = DispatchStep | NotifyScheduler | PublishStatus | RaiseOperatorAlert;
