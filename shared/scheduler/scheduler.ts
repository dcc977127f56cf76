import type { InvocationContext } from '@azure/functions';
import { outstandingCommands, outstandingStep, type OrderEvent, type OrderState } from '../domain/index.js';
import { notifyCommand } from '../domain/commandFactory.js';
import { applyEvent, type ApplyResult } from '../app/applyEvent.js';
import type { Dependencies } from '../app/ports.js';
import { carryOut } from '../messaging/commandMessages.js';
import {
  parseMessage,
  schedulerMessageSchema,
  type AgentReplyMessage,
  type SchedulerMessage,
} from '../messaging/contracts.js';
import { queues } from '../messaging/entities.js';
import { rejectPoison } from '../messaging/poison.js';
import { logger, type Logger } from '../observability/logger.js';
import { annotate, stateFields } from '../observability/tracing.js';

/**
 * The Scheduler. It claims a Pending order (ETag-guarded: LockedBy = this invocation, a new
 * CompleteBy, ProcessState = Processing) and dispatches its current step; it applies the Agents'
 * replies and moves to the next step, or compensates. Every message it handles ends by making
 * sure the recorded state's messages went out: after a crash between a write and its sends, the
 * next delivery (or a duplicate) resumes from the recorded state.
 */

/** A claim message that arrives this much before the order's back-off ends is early. */
const earlyToleranceMs = 2000;

export async function handleSchedulerMessage(
  deps: Dependencies,
  body: unknown,
  context: InvocationContext,
): Promise<void> {
  const baseLog = logger(context, { actor: 'scheduler' });
  const parsed = parseMessage(schedulerMessageSchema, body);
  if (!parsed.ok) {
    return rejectPoison(deps.bus, queues.scheduler, context, parsed, body, deps.clock.now(), baseLog);
  }
  const message = parsed.value;
  annotate({ orderId: message.orderId, ...(message.type === 'agent-reply' ? replyFields(message) : {}) });
  const log = baseLog.with({ orderId: message.orderId });
  const messageId = context.triggerMetadata?.messageId;
  const result =
    message.type === 'process-order'
      ? await applyEvent(deps, message.orderId, { type: 'Claim', by: context.invocationId }, (state, now) =>
          notBeforeBackoff(state, now, typeof messageId === 'string' ? messageId : undefined),
        )
      : await applyEvent(deps, message.orderId, replyEvent(message));
  await settle(deps, message, result, log.with(message.type === 'agent-reply' ? replyFields(message) : {}));
}

function replyEvent(reply: AgentReplyMessage): OrderEvent {
  const { step, run, attempt } = reply;
  const error = reply.error
    ? `${reply.error.status === undefined ? '' : `${reply.error.status}: `}${reply.error.message}`
    : 'no detail';
  if (reply.outcome === 'accepted') {
    return {
      type: 'StepAccepted',
      step,
      run,
      attempt,
      ...(reply.reference ? { reference: reply.reference } : {}),
    };
  }
  if (reply.outcome === 'stalled')
    return { type: 'StepStalled', step, run, attempt, kind: reply.kind, detail: error };
  // Never picked up in time says nothing about the order: retried like a stall, no failure counted.
  // Waiting for a call slot moves the step's complete-by out by the wait; nothing else changes.
  if (reply.outcome === 'waiting')
    return {
      type: 'StepWaiting',
      step,
      run,
      attempt,
      kind: reply.kind,
      completeBy: new Date(reply.completeBy ?? 0),
    };
  if (reply.outcome === 'not-started')
    return { type: 'StepStalled', step, run, attempt, kind: reply.kind, detail: `not started: ${error}` };
  if (reply.kind === 'do') {
    return reply.outcome === 'succeeded'
      ? { type: 'StepSucceeded', step, run, attempt }
      : { type: 'StepFailedPermanently', step, run, attempt, error };
  }
  return reply.outcome === 'succeeded'
    ? { type: 'CompensationSucceeded', step, run, attempt }
    : { type: 'CompensationFailed', step, run, attempt, error };
}

/** The invocation's span says what it did to the order: the state it left, or why nothing changed. */
function annotateResult(result: ApplyResult): void {
  if (result.kind === 'not-found') return annotate({ outcome: 'not-found' });
  const stored = result.kind === 'applied' ? result.before : result.current;
  const state = result.kind === 'applied' ? result.state : result.current.state;
  annotate({
    ...stateFields(stored.state),
    ...(result.kind === 'applied' && result.before.state.processState === 'Pending'
      ? outstandingStep(state)
      : {}),
    outcome: result.kind === 'applied' ? state.processState : result.kind,
  });
}

function replyFields(reply: AgentReplyMessage) {
  return {
    step: reply.step,
    attempt: reply.attempt,
    kind: reply.kind,
    run: reply.run,
    outcome: reply.outcome,
  };
}

/**
 * An early duplicate must not jump the back-off. But the order's own scheduled retry (the message
 * id the recorded state implies) claims whenever it arrives: the broker decided it is due, and its
 * clock may simply run ahead of this host's. Comparing clocks here would drop the only retry.
 */
function notBeforeBackoff(state: OrderState, now: Date, messageId: string | undefined): string | undefined {
  if (state.processState !== 'Pending' || state.scheduledFor === null) return undefined;
  if (messageId !== undefined && messageId === notifyCommand(state, now).messageId) return undefined;
  return state.scheduledFor.getTime() - now.getTime() > earlyToleranceMs
    ? `backing off until ${state.scheduledFor.toISOString()}`
    : undefined;
}

async function settle(deps: Dependencies, message: SchedulerMessage, result: ApplyResult, log: Logger) {
  annotateResult(result);
  switch (result.kind) {
    case 'not-found':
      // Submission writes before it sends, so this names no order we ever acknowledged.
      log.warn('message names no recorded order; dropped', { type: message.type });
      return;
    case 'skipped': {
      // Deferred, not dropped: the order's scheduled retry is sent again (same id, scheduled for
      // the end of the back-off). If it is queued already, duplicate detection absorbs this copy;
      // if the write that scheduled it died before sending, this is the retry now.
      log.info('claim deferred to the end of the back-off', { why: result.why });
      const now = deps.clock.now();
      await carryOut(
        deps,
        outstandingCommands(deps.workflows, result.current.state, now),
        result.current.order,
        now,
        log,
      );
      return;
    }
    case 'applied':
      log.info(message.type === 'process-order' ? 'claimed' : 'reply applied', {
        // A claim names the step it dispatched; a reply's step and attempt are in the logger already.
        ...(message.type === 'process-order' ? outstandingStep(result.state) : {}),
        from: result.before.state.processState,
        to: result.state.processState,
        failureCount: result.state.failureCount,
      });
      await carryOut(deps, result.commands, result.before.order, deps.clock.now(), log);
      return;
    case 'refused': {
      // A duplicate, a stale attempt, or an order someone else already moved on. Nothing to
      // change; but the recorded state's messages may never have gone out (a crash after the
      // write), so send them again. Their ids are deterministic: duplicates are dropped.
      const level = result.refusal.code === 'StaleAttempt' || result.refusal.code === 'NotAllowedInState';
      (level ? log.info : log.warn)('nothing to change; resending what the recorded state implies', {
        refusal: result.refusal.code,
        detail: result.refusal.message,
        processState: result.current.state.processState,
      });
      const now = deps.clock.now();
      const commands = outstandingCommands(deps.workflows, result.current.state, now);
      await carryOut(deps, commands, result.current.order, now, log);
      return;
    }
  }
}
