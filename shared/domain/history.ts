import type { OrderEvent } from './events.js';
import type { OrderState } from './state.js';

/** Who moved the order: the pattern's roles, plus the client that submitted and the operator. */
export type HistoryActor = 'submission' | 'scheduler' | 'agent' | 'supervisor' | 'operator';

/** One transition of one order as the operator reads it on the order's timeline. */
export interface HistoryEntry {
  at: Date;
  actor: HistoryActor;
  /** The operator's name or identity, when actor = operator. */
  by?: string;
  /** The event's name (OrderSubmitted, StepSucceeded, OperatorResubmit, DeadLetterRedriven...). */
  event: string;
  step?: string;
  attempt?: number;
  run?: number;
  workflow?: string;
  workflowVersion?: number;
  /** The process state after the transition, or what happened to a message ('redriven'...). */
  outcome?: string;
  /** Error code and detail, at most historyErrorLimit characters. */
  error?: string;
  /** W3C trace id when tracing is on. */
  traceId?: string;
}

/** A history entity stays far below the 1 MiB entity and 64 KiB property limits. */
export const historyErrorLimit = 2000;

export function clipHistoryError(text: string): string {
  return text.length <= historyErrorLimit ? text : `${text.slice(0, historyErrorLimit - 1)}…`;
}

const eventNames: Record<OrderEvent['type'], string> = {
  Submit: 'OrderSubmitted',
  Claim: 'Claimed',
  StepSucceeded: 'StepSucceeded',
  StepFailedPermanently: 'StepFailed',
  TimedOut: 'TimedOut',
  StepStalled: 'StepStalled',
  StepWaiting: 'StepWaitingForCapacity',
  CompensationSucceeded: 'CompensationSucceeded',
  CompensationFailed: 'CompensationFailed',
  OperatorResubmit: 'OperatorResubmit',
  OperatorCancel: 'OperatorCancel',
  OperatorRetry: 'OperatorRetry',
  StepAccepted: 'StepAccepted',
  StepHeartbeat: 'StepHeartbeat',
  CallbackAnswered: 'CallbackAnswered',
  ApprovalDecided: 'ApprovalDecided',
};

function actorOf(event: OrderEvent): HistoryActor {
  switch (event.type) {
    case 'Submit':
      return 'submission';
    case 'Claim':
      return 'scheduler';
    case 'TimedOut':
      return 'supervisor';
    case 'OperatorResubmit':
    case 'OperatorCancel':
    case 'OperatorRetry':
    case 'ApprovalDecided':
      return 'operator';
    default:
      return 'agent';
  }
}

/** The step a transition acted on: the reply's, else the one it left running or compensating. */
function stepOf(event: OrderEvent, before: OrderState | null, after: OrderState) {
  if ('step' in event) return { step: event.step, attempt: event.attempt, run: event.run };
  const active =
    after.steps.find((s) => s.status === 'Running' || s.status === 'Compensating') ??
    (before ? before.steps.find((s) => s.status === 'Running' || s.status === 'Compensating') : undefined);
  if (!active) return {};
  const attempt = active.status === 'Compensating' ? active.compensationAttempt : active.attempt;
  return { step: active.name, attempt, run: active.run };
}

function errorOf(event: OrderEvent, before: OrderState | null, after: OrderState): string | undefined {
  if ('error' in event) return event.error;
  if (event.type === 'StepStalled') return event.detail;
  if (event.type === 'OperatorCancel') return event.reason;
  if (event.type === 'ApprovalDecided') return `${event.decision}: ${event.reason}`;
  if (event.type === 'CallbackAnswered' && event.outcome === 'failed')
    return event.error ?? 'refused by callback';
  if (event.type === 'TimedOut') {
    const timedOut = after.steps.find(
      (s, i) => s.lastError !== null && s.lastError !== before?.steps[i]?.lastError,
    );
    if (timedOut?.lastError) return timedOut.lastError;
  }
  if (after.errorCode !== null && after.errorCode !== before?.errorCode) {
    return `${after.errorCode}: ${after.errorDetail ?? ''}`.trim();
  }
  return undefined;
}

/**
 * What one applied transition adds to the order's history. Pure: the store writes it in the same
 * entity-group transaction as the state, so a transition and its entry exist together or not at all.
 */
export function historyEntryFor(
  event: OrderEvent,
  before: OrderState | null,
  after: OrderState,
  now: Date,
  workflowVersion?: number,
): HistoryEntry {
  const entry: HistoryEntry = {
    at: now,
    actor: actorOf(event),
    event: eventNames[event.type],
    workflow: after.workflow,
    outcome: after.processState,
  };
  if ('by' in event && entry.actor === 'operator') entry.by = event.by;
  const { step, attempt, run } = stepOf(event, before, after);
  if (step !== undefined) entry.step = step;
  if (attempt !== undefined) entry.attempt = attempt;
  entry.run = run ?? after.run;
  if (workflowVersion !== undefined) entry.workflowVersion = workflowVersion;
  const error = errorOf(event, before, after);
  if (error !== undefined && error !== '') entry.error = clipHistoryError(error);
  return entry;
}
