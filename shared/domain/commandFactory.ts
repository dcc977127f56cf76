import type {
  Command,
  DispatchStep,
  NotifyScheduler,
  PublishStatus,
  RaiseOperatorAlert,
  StatusEventName,
} from './commands.js';
import {
  actionIdempotencyKey,
  alertMessageId,
  compensationIdempotencyKey,
  dispatchMessageId,
  processOrderMessageId,
  statusMessageId,
} from './keys.js';
import type { OrderState } from './state.js';
import { completionOf, longestWaitSeconds } from './waiting.js';
import { stepDefinition, workflowLabel, type Workflow } from './workflow.js';

/**
 * Builds commands from recorded state only, so transition.ts (right after a write) and
 * outstanding.ts (healing after a crash) produce identical messages with identical ids.
 */
export function delayUntil(state: OrderState, now: Date): number {
  if (state.scheduledFor === null) return 0;
  return Math.max(0, Math.ceil((state.scheduledFor.getTime() - now.getTime()) / 1000));
}

/** The request for the order's step at `index` (its position in the recorded state). */
export function dispatchCommand(
  workflow: Workflow,
  state: OrderState,
  index: number,
  kind: 'do' | 'compensate',
  delaySeconds: number,
): DispatchStep {
  const step = state.steps[index];
  // By name: the recorded step and its declaration must be the same step, whatever the order.
  const def = stepDefinition(workflow, step.name);
  if (!def) throw new Error(`internal: ${workflowLabel(workflow)} has no step ${step.name}`);
  const compensate = kind === 'compensate';
  const action = compensate ? def.compensation : def.action;
  if (action === null || step.completeBy === null) {
    throw new Error(`internal: no ${kind} dispatch for step ${def.name} in its state`);
  }
  const attempt = compensate ? step.compensationAttempt : step.attempt;
  const actionKey = actionIdempotencyKey(state.orderId, def.name, step.run);
  return {
    type: 'DispatchStep',
    orderId: state.orderId,
    run: state.run,
    step: def.name,
    agentQueue: def.agentQueue,
    action,
    kind,
    attempt,
    completeBy: step.completeBy,
    delaySeconds,
    idempotencyKey: compensate
      ? compensationIdempotencyKey(state.orderId, def.name, step.run, state.run)
      : actionKey,
    actionIdempotencyKey: actionKey,
    messageId: dispatchMessageId(state.orderId, def.name, attempt, kind, state.run),
    // From recorded state only (healing rebuilds the same request): the call's window, then the wait.
    ...(!compensate && completionOf(def) === 'callback'
      ? { callbackUntil: new Date(step.completeBy.getTime() + longestWaitSeconds(def) * 1000) }
      : {}),
  };
}

/** The process-order message that asks a Scheduler to claim a Pending order. */
export function notifyCommand(state: OrderState, now: Date): NotifyScheduler {
  const delaySeconds = delayUntil(state, now);
  let reason: NotifyScheduler['reason'];
  let n: number;
  // Every retry, counted or stalled, gets its own number, so no retry's message id repeats another's.
  const retries = state.failureCount + state.steps.reduce((sum, st) => sum + st.stalls, 0);
  if (retries > 0) {
    // Delayed exactly when the transition applied the extended back-off (scheduledFor > updatedAt).
    const delayed = state.scheduledFor !== null && state.scheduledFor.getTime() > state.updatedAt.getTime();
    reason = delayed ? 'backoff-retry' : 'retry';
    n = retries;
  } else if (state.run > 1) {
    reason = 'resubmitted';
    n = state.run;
  } else {
    reason = 'submitted';
    n = 1;
  }
  return {
    type: 'NotifyScheduler',
    orderId: state.orderId,
    run: state.run,
    reason,
    delaySeconds,
    messageId: processOrderMessageId(state.orderId, reason, n, state.run),
  };
}

/**
 * What a Pending order is owed: its process-order message and, before any failure in this run
 * (right after a submit or a resubmit), its `received` event.
 */
export function pendingCommands(state: OrderState, now: Date): Command[] {
  const commands: Command[] = [notifyCommand(state, now)];
  if (neverDispatchedThisRun(state)) commands.push(statusCommand(state, 'received', now));
  return commands;
}

/**
 * `received` is owed (and re-sent by healing) only while nothing of this run has been tried: a
 * Pending order that is waiting after a stalled attempt (no failure counted) was received long ago.
 */
function neverDispatchedThisRun(state: OrderState): boolean {
  return (
    state.failureCount === 0 &&
    state.steps.every((s) => s.stalls === 0 && (s.attempt === 0 || s.run !== state.run))
  );
}

/** The `failed` event of the step a business refusal failed, while the order is being undone or after. */
export function failedStepStatus(state: OrderState): Command[] {
  if (state.compensationReason !== 'step-failed') return [];
  const step = state.steps.find((s) => s.status === 'Failed');
  if (!step) return [];
  return [statusCommand(state, 'failed', state.updatedAt, step.name, step.lastError ?? undefined)];
}

export function statusCommand(
  state: OrderState,
  event: StatusEventName,
  at: Date,
  step?: string,
  detail?: string,
): PublishStatus {
  const cmd: PublishStatus = {
    type: 'PublishStatus',
    orderId: state.orderId,
    run: state.run,
    event,
    processState: state.processState,
    at,
    messageId: statusMessageId(state.orderId, event, state.run, step),
  };
  if (step !== undefined) cmd.step = step;
  if (detail !== undefined) cmd.detail = detail;
  return cmd;
}

export function alertCommand(state: OrderState, at: Date): RaiseOperatorAlert {
  if (state.errorCode === null) throw new Error('internal: alert without an error code');
  return {
    type: 'RaiseOperatorAlert',
    orderId: state.orderId,
    run: state.run,
    code: state.errorCode,
    reason: state.errorDetail ?? state.errorCode,
    processState: state.processState,
    failureCount: state.failureCount,
    at,
    messageId: alertMessageId(state.orderId, state.errorCode, state.run),
  };
}

export type { Command };
