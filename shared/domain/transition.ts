import type { Command } from './commands.js';
import {
  alertCommand,
  dispatchCommand,
  notifyCommand,
  pendingCommands,
  statusCommand,
} from './commandFactory.js';
import { addSeconds } from './clock.js';
import { TransitionRefused } from './errors.js';
import { alertMessageId } from './keys.js';
import type { OrderEvent } from './events.js';
import { isOrderId } from './orderId.js';
import type { Policy } from './policy.js';
import type { CompensationReason, OrderState, StepState, StepStatus } from './state.js';
import { afterTimeouts, backoffSeconds, isOverdue, owesOperatorAlert } from './supervision.js';
import { stepDefinition, stepTimeoutSeconds, workflowLabel, type Workflow } from './workflow.js';
import { versionsOf, workflowOf, type Workflows } from './workflowVersions.js';
import { completionOf, escalationAt, formatAnswer, heartbeatCompleteBy, waitCompleteBy } from './waiting.js';

export interface Decision {
  state: OrderState;
  commands: Command[];
}

const maxErrorLength = 2000;

/**
 * The one transition function of the engine: pure, no I/O. The adapter loads the state, calls
 * this, writes `state` with its ETag and only then carries out `commands`. An event that does not
 * apply throws TransitionRefused and the input is left untouched.
 *
 * A new order starts on the latest of `workflows`; every other event is decided on the version
 * the order recorded. An unfinished order whose version is not held moves to Error with an
 * operator alert naming the version: never decided on another version's steps, never left waiting.
 */
export function decide(
  workflows: Workflows,
  state: OrderState | null,
  event: OrderEvent,
  now: Date,
  policy: Policy,
): Decision {
  if (!(now instanceof Date) || Number.isNaN(now.getTime()))
    throw refuse('InvalidEvent', 'now is not a date');
  if (state === null) {
    if (event.type !== 'Submit') throw refuse('NoSuchOrder', `${event.type} needs an existing order`);
    return submit(versionsOf(workflows).latest, event.orderId, now, policy, event.waive, event.notBefore);
  }
  if (event.type === 'Submit') throw refuse('AlreadySubmitted', `order ${state.orderId} exists`);
  const workflow = workflowOf(workflows, state);
  if (!workflow) return retired(workflows, state, event, now);
  const decision = apply(workflow, state, event, now, policy);
  if (owesOperatorAlert(decision.state) && !decision.commands.some((c) => c.type === 'RaiseOperatorAlert')) {
    decision.commands.unshift(alertCommand(decision.state, decision.state.updatedAt));
  }
  return decision;
}

function apply(
  workflow: Workflow,
  state: OrderState,
  event: OrderEvent,
  now: Date,
  policy: Policy,
): Decision {
  // Work on a copy: a refusal thrown half-way must leave the caller's state as it was.
  const s = structuredClone(state);
  const t = new Transition(workflow, s, now, policy);
  switch (event.type) {
    case 'Submit':
      throw refuse('AlreadySubmitted', `order ${state.orderId} exists`);
    case 'Claim':
      t.claim(event.by);
      break;
    case 'StepSucceeded':
      t.stepSucceeded(t.notWaiting(t.currentDo(event)));
      break;
    case 'StepAccepted':
      t.accepted(t.currentDo(event), event.reference);
      break;
    case 'StepHeartbeat':
      t.heartbeat(t.currentDo(event));
      break;
    case 'CallbackAnswered':
      t.callbackAnswered(t.currentDo(event), event);
      break;
    case 'ApprovalDecided':
      t.approvalDecided(event.by, event.decision, event.reason);
      break;
    case 'StepFailedPermanently':
      t.stepFailed(t.currentDo(event), event.error);
      break;
    case 'TimedOut':
      t.timedOut();
      break;
    case 'StepStalled':
      t.stepStalled(event);
      break;
    case 'StepWaiting':
      t.stepWaiting(event);
      break;
    case 'CompensationSucceeded':
      t.compensationSucceeded(t.currentCompensation(event));
      break;
    case 'CompensationFailed':
      t.compensationFailed(t.currentCompensation(event), event.error);
      break;
    case 'OperatorResubmit':
      t.resubmit(event.by);
      break;
    case 'OperatorCancel':
      t.cancel(event.by, event.reason);
      break;
    case 'OperatorRetry':
      t.retryNow(event.by);
      break;
    default: {
      const unknown: never = event;
      throw refuse('InvalidEvent', `unknown event ${JSON.stringify(unknown)}`);
    }
  }
  s.updatedAt = now;
  return { state: s, commands: t.commands };
}

/**
 * The order's workflow version is not deployed here (removed while orders were still on it, or
 * edited in place). Nothing can be dispatched or undone without its steps, so the order stops in
 * Error where it is and the alert names the version: an operator redeploys that version (the
 * order then carries on when resubmitted) or settles the order by hand.
 */
function retired(workflows: Workflows, state: OrderState, event: OrderEvent, now: Date): Decision {
  const label = workflowLabel({ name: state.workflow, version: state.workflowVersion });
  const held = versionsOf(workflows).all.map(workflowLabel).join(', ');
  if (
    state.processState === 'Processed' ||
    state.processState === 'Compensated' ||
    state.processState === 'Error'
  ) {
    throw refuse(
      'WorkflowRetired',
      `${event.type}: order is ${state.processState} on ${label}, which this app does not hold (${held})`,
    );
  }
  const s = structuredClone(state);
  const at = outstandingStepName(s);
  // What was in flight stays in doubt, recorded as such: an action without its reply (TimedOut),
  // an undo without its reply (CompensationFailed). Nothing more is sent for either.
  for (const st of s.steps) {
    if (st.status === 'Running') st.status = 'TimedOut';
    else if (st.status === 'Compensating') st.status = 'CompensationFailed';
    st.completeBy = null;
  }
  s.processState = 'Error';
  s.lockedBy = null;
  s.completeBy = null;
  s.scheduledFor = null;
  s.errorCode = 'WorkflowRetired';
  s.errorDetail = clip(
    `workflow ${label} is not deployed (this app holds ${held}); ${event.type} not applied` +
      `${at ? `; stopped at step ${at}` : ''}, nothing undone`,
  );
  s.updatedAt = now;
  return {
    state: s,
    commands: [alertCommand(s, now), statusCommand(s, 'error', now, undefined, s.errorDetail)],
  };
}

function outstandingStepName(s: OrderState): string | undefined {
  return s.steps.find(
    (st) => st.status === 'Running' || st.status === 'TimedOut' || st.status === 'Compensating',
  )?.name;
}

/** How far ahead a wait for a call slot may move a step's complete-by. */
export const maxWaitExtensionMs = 86_400_000;

function refuse(code: TransitionRefused['code'], message: string): TransitionRefused {
  return new TransitionRefused(code, message);
}

function submit(
  workflow: Workflow,
  orderId: string,
  now: Date,
  policy: Policy,
  waive: readonly string[] = [],
  notBefore?: Date,
): Decision {
  if (!isOrderId(orderId)) throw refuse('InvalidEvent', 'Submit needs a valid order id');
  if (notBefore !== undefined && !(notBefore instanceof Date && Number.isFinite(notBefore.getTime())))
    throw refuse('InvalidEvent', 'Submit notBefore is not a date');
  // Claimed from its customer's turn at the intake (never before now), and given the usual claim
  // timeout from then: the Supervisor must not re-send a claim that is only scheduled.
  const claimFrom = notBefore !== undefined && notBefore > now ? notBefore : now;
  const state: OrderState = {
    orderId,
    workflow: workflow.name,
    workflowVersion: workflow.version,
    run: 1,
    processState: 'Pending',
    lockedBy: null,
    completeBy: addSeconds(claimFrom, policy.claimTimeoutSeconds),
    failureCount: 0,
    scheduledFor: claimFrom,
    compensationReason: null,
    errorCode: null,
    errorDetail: null,
    createdAt: now,
    updatedAt: now,
    steps: workflow.steps.map((d) => freshStep(d.name, 1)),
  };
  // An approval the order does not need (its amount) is done from the start: claim skips it.
  for (const st of state.steps) {
    if (waive.includes(st.name) && completionOf(stepDefinition(workflow, st.name)) === 'approval') {
      st.status = 'Completed';
      st.completedAt = now;
    }
  }
  return { state, commands: [notifyCommand(state, now), statusCommand(state, 'received', now)] };
}

function freshStep(name: string, run: number): StepState {
  return {
    name,
    status: 'NotStarted',
    run,
    attempt: 0,
    compensationAttempt: 0,
    completeBy: null,
    lastError: null,
    startedAt: null,
    completedAt: null,
    compensatedAt: null,
    stalledAttempt: null,
    stalls: 0,
    undoStalls: 0,
    waitingSince: null,
    reference: null,
    answer: null,
  };
}

/**
 * Steps that compensation must undo. Completed ones, obviously; and a step whose action is in
 * doubt (Running, or TimedOut: the remote call may have happened although no reply came). Undoing
 * an in-doubt step is safe because a compensation carries its own idempotency key and names the
 * action's key: a remote service that never performed the action records a tombstone and answers
 * success, and refuses the action if it arrives late. Not undoing it could leave a charge behind.
 * A Failed step is not undone: the service refused it, so nothing happened.
 */
const compensable: readonly StepStatus[] = ['Completed', 'Running', 'TimedOut'];

function clip(text: string): string {
  return text.length > maxErrorLength ? text.slice(0, maxErrorLength) : text;
}

function positiveInt(n: unknown): boolean {
  return Number.isInteger(n) && (n as number) >= 1;
}

class Transition {
  readonly commands: Command[] = [];

  constructor(
    private readonly workflow: Workflow,
    private readonly s: OrderState,
    private readonly now: Date,
    private readonly policy: Policy,
  ) {}

  private requireState(allowed: OrderState['processState'][], what: string): void {
    if (!allowed.includes(this.s.processState)) {
      throw refuse('NotAllowedInState', `${what} is not allowed when the order is ${this.s.processState}`);
    }
  }

  /** The order's own step of that name (its position is the recorded one, never the declaration's). */
  private indexOf(name: unknown): number {
    const i = typeof name === 'string' ? this.s.steps.findIndex((st) => st.name === name) : -1;
    if (i < 0)
      throw refuse('UnknownStep', `no step ${String(name)} in workflow ${workflowLabel(this.workflow)}`);
    return i;
  }

  private checkReply(e: { step: string; run: number; attempt: number }): number {
    const i = this.indexOf(e.step);
    if (!positiveInt(e.run) || !positiveInt(e.attempt)) {
      throw refuse('InvalidEvent', 'run and attempt must be positive integers');
    }
    return i;
  }

  /** The step a do-reply answers, if it is the attempt we are waiting for. */
  currentDo(e: { step: string; run: number; attempt: number }): number {
    const i = this.checkReply(e);
    const step = this.s.steps[i];
    const current =
      this.s.processState === 'Processing' &&
      step.status === 'Running' &&
      e.run === this.s.run &&
      e.attempt === step.attempt;
    if (!current) {
      throw refuse(
        'StaleAttempt',
        `reply for ${e.step} run ${e.run} attempt ${e.attempt}; current: ${this.s.processState}, ` +
          `step ${step.status} run ${this.s.run} attempt ${step.attempt}`,
      );
    }
    return i;
  }

  currentCompensation(e: { step: string; run: number; attempt: number }): number {
    const i = this.checkReply(e);
    const step = this.s.steps[i];
    const current =
      this.s.processState === 'Compensating' &&
      step.status === 'Compensating' &&
      e.run === this.s.run &&
      e.attempt === step.compensationAttempt;
    if (!current) {
      throw refuse(
        'StaleAttempt',
        `compensation reply for ${e.step} run ${e.run} attempt ${e.attempt}; current: ` +
          `${this.s.processState}, step ${step.status} attempt ${step.compensationAttempt}`,
      );
    }
    return i;
  }

  claim(by: string): void {
    if (typeof by !== 'string' || by.trim() === '')
      throw refuse('InvalidEvent', 'Claim needs an invocation id');
    this.requireState(['Pending'], 'Claim');
    this.s.lockedBy = by;
    this.s.processState = 'Processing';
    this.s.scheduledFor = null;
    const next = this.s.steps.findIndex((st) => st.status !== 'Completed');
    if (next < 0) this.processed();
    else this.dispatchDo(next);
  }

  stepSucceeded(i: number): void {
    const step = this.s.steps[i];
    step.status = 'Completed';
    step.completedAt = this.now;
    step.completeBy = null;
    step.lastError = null;
    this.commands.push(statusCommand(this.s, 'step-completed', this.now, step.name));
    const next = this.s.steps.findIndex((st, j) => j > i && st.status !== 'Completed');
    if (next < 0) this.processed();
    else this.dispatchDo(next);
  }

  stepFailed(i: number, error: string): void {
    const step = this.s.steps[i];
    step.status = 'Failed';
    step.completeBy = null;
    step.lastError = clip(String(error));
    this.commands.push(statusCommand(this.s, 'failed', this.now, step.name, step.lastError));
    this.startCompensation('step-failed');
  }

  /**
   * The Agent saw an operational failure (not a refusal) and will send nothing more for this
   * attempt. Recorded only: the step stays in flight until complete-by, when the Supervisor retries
   * it without spending the failure budget.
   */
  stepStalled(e: {
    step: string;
    run: number;
    attempt: number;
    kind: 'do' | 'compensate';
    detail: string;
  }): void {
    const i = e.kind === 'do' ? this.currentDo(e) : this.currentCompensation(e);
    const step = this.s.steps[i];
    step.stalledAttempt = e.attempt;
    step.lastError = clip(`attempt ${e.attempt} stalled: ${String(e.detail)}`);
    // Nothing is in flight any more: retried a step timeout from now at the latest. A complete-by
    // moved far out while the request waited for a call slot (StepWaiting) would otherwise leave
    // the order idle until then (bench: 15 minutes after a 429 storm).
    const retryBy = addSeconds(this.now, this.stepTimeout(i));
    if (step.completeBy !== null && step.completeBy > retryBy) step.completeBy = retryBy;
    if (this.s.completeBy !== null && this.s.completeBy > retryBy) this.s.completeBy = retryBy;
  }

  /**
   * The Agent sent the request back to wait for a call slot (issue 26): the complete-by moves out
   * to the one the re-sent request carries, never in, and never further than a day ahead.
   */
  stepWaiting(e: {
    step: string;
    run: number;
    attempt: number;
    kind: 'do' | 'compensate';
    completeBy: Date;
  }): void {
    const i = e.kind === 'do' ? this.currentDo(e) : this.currentCompensation(e);
    const until = e.completeBy instanceof Date ? e.completeBy.getTime() : Number.NaN;
    if (!Number.isFinite(until) || until > this.now.getTime() + maxWaitExtensionMs) {
      throw refuse(
        'InvalidEvent',
        `StepWaiting needs a complete-by within a day, got ${String(e.completeBy)}`,
      );
    }
    const step = this.s.steps[i];
    if (step.completeBy !== null && until > step.completeBy.getTime()) step.completeBy = new Date(until);
    if (this.s.completeBy !== null && until > this.s.completeBy.getTime())
      this.s.completeBy = new Date(until);
  }

  timedOut(): void {
    this.requireState(['Pending', 'Processing', 'Compensating'], 'TimedOut');
    const completeBy = this.s.completeBy;
    if (!isOverdue(completeBy, this.now)) {
      throw refuse('NotExpired', `complete-by ${completeBy?.toISOString() ?? 'none'} has not passed`);
    }
    if (this.s.processState === 'Compensating') {
      this.compensationTimedOut();
      return;
    }
    if (this.s.processState === 'Pending') {
      this.claimTimedOut();
      return;
    }
    const running = this.s.steps.findIndex((st) => st.status === 'Running');
    if (running >= 0 && completionOf(this.workflow.steps[running]) === 'approval') {
      this.approvalTimedOut(running);
      return;
    }
    if (running >= 0 && this.s.steps[running].stalledAttempt === this.s.steps[running].attempt) {
      this.stalledTimedOut(running);
      return;
    }
    if (running >= 0) {
      const step = this.s.steps[running];
      step.status = 'TimedOut';
      step.completeBy = null;
      step.lastError = `attempt ${step.attempt} passed its complete-by`;
    }
    this.s.lockedBy = null;
    this.s.failureCount += 1;
    const f = this.s.failureCount;
    const verdict = afterTimeouts(f, this.policy);
    if (verdict.kind === 'give-up') {
      this.s.errorCode = 'GaveUp';
      this.s.errorDetail = `gave up after ${f} timeouts`;
      this.startCompensation('gave-up', true);
      return;
    }
    const delay = verdict.delaySeconds;
    this.s.processState = 'Pending';
    this.s.scheduledFor = addSeconds(this.now, delay);
    this.s.completeBy = addSeconds(this.now, delay + this.policy.claimTimeoutSeconds);
    // notifyCommand reads updatedAt to tell a back-off from an immediate retry.
    this.s.updatedAt = this.now;
    this.commands.push(notifyCommand(this.s, this.now));
  }

  /**
   * Nobody claimed the order in time: a busy or absent Scheduler, or a lost process-order message.
   * Waiting is not failing, so the failure count stays. The order is due now (any back-off has
   * ended) and its process-order message goes out again under the id the recorded state implies:
   * a copy still queued absorbs it (duplicate detection), so re-sends do not pile up.
   */
  private claimTimedOut(): void {
    this.s.scheduledFor = this.now;
    this.s.completeBy = addSeconds(this.now, this.policy.claimTimeoutSeconds);
    this.s.updatedAt = this.now;
    this.commands.push(...pendingCommands(this.s, this.now));
  }

  /**
   * A stalled attempt ran out of time: the service could not answer, which says nothing about the
   * order. Retry without spending the failure budget, backing off once stalls repeat; the order
   * waits until the service recovers or an operator acts (the Agent's outage alert tells them).
   */
  private stalledTimedOut(i: number): void {
    const step = this.s.steps[i];
    step.status = 'TimedOut';
    step.completeBy = null;
    step.stalls += 1;
    this.s.lockedBy = null;
    const delay = backoffSeconds(step.stalls, this.policy);
    this.s.processState = 'Pending';
    this.s.scheduledFor = addSeconds(this.now, delay);
    this.s.completeBy = addSeconds(this.now, delay + this.policy.claimTimeoutSeconds);
    this.s.updatedAt = this.now;
    this.commands.push(notifyCommand(this.s, this.now));
  }

  private compensationTimedOut(): void {
    const i = this.s.steps.findIndex((st) => st.status === 'Compensating');
    if (i < 0) throw new Error('internal: Compensating order without a compensating step');
    const step = this.s.steps[i];
    if (step.stalledAttempt === step.compensationAttempt) {
      step.undoStalls += 1;
      this.dispatchCompensation(i, backoffSeconds(step.undoStalls, this.policy));
      return;
    }
    // Only silent timeouts count towards giving up; stalled undos were retried for free.
    const timeouts = step.compensationAttempt - step.undoStalls;
    const verdict = afterTimeouts(timeouts, this.policy);
    if (verdict.kind === 'give-up') {
      step.status = 'CompensationFailed';
      step.completeBy = null;
      step.lastError = `compensation timed out ${timeouts} times`;
      this.error('CompensationGaveUp', `compensation of ${step.name} timed out ${timeouts} times`);
      return;
    }
    this.dispatchCompensation(i, verdict.delaySeconds);
  }

  compensationSucceeded(i: number): void {
    const step = this.s.steps[i];
    step.status = 'Compensated';
    step.compensatedAt = this.now;
    step.completeBy = null;
    this.compensateNextOrFinish();
  }

  compensationFailed(i: number, error: string): void {
    const step = this.s.steps[i];
    step.status = 'CompensationFailed';
    step.completeBy = null;
    step.lastError = clip(String(error));
    this.error('CompensationFailed', `compensation of ${step.name} failed: ${step.lastError}`);
  }

  resubmit(by: string): void {
    if (typeof by !== 'string' || by.trim() === '')
      throw refuse('InvalidEvent', 'OperatorResubmit needs an operator');
    this.requireState(['Error'], 'OperatorResubmit');
    const run = this.s.run + 1;
    const undoRefused = this.s.errorCode === 'CompensationFailed';
    this.s.run = run;
    this.s.processState = 'Pending';
    this.s.lockedBy = null;
    this.s.failureCount = 0;
    this.s.compensationReason = null;
    this.s.errorCode = null;
    this.s.errorDetail = null;
    this.s.scheduledFor = this.now;
    this.s.completeBy = addSeconds(this.now, this.policy.claimTimeoutSeconds);
    // A step still Completed was never undone: its effect stands and is not repeated. A step whose
    // undo the service refused may have its effect too, or (if it was in doubt) may never have run:
    // it runs again under its ORIGINAL run's idempotency key, so a service that did it answers from
    // its record (no second charge) and one that did not does it once. An undo that only timed out
    // (CompensationGaveUp) is in doubt both ways; that step, like every other, runs again under the
    // new run's key: the operator who was alerted and resubmits has checked the service.
    this.s.steps = this.s.steps.map((st) => {
      if (st.status === 'Completed') return { ...st, stalledAttempt: null, stalls: 0, undoStalls: 0 };
      return freshStep(st.name, undoRefused && st.status === 'CompensationFailed' ? st.run : run);
    });
    this.s.updatedAt = this.now;
    this.commands.push(notifyCommand(this.s, this.now));
    this.commands.push(statusCommand(this.s, 'received', this.now, undefined, `resubmitted by ${by}`));
  }

  /**
   * An operator who fixed the cause need not wait out the back-off. Only a Pending order whose
   * claim is still in the future qualifies, so a second request (or a second bulk run) is refused
   * rather than sending another claim. The claim goes out under the immediate-retry id; the
   * back-off message still queued later finds the order claimed and is refused.
   */
  retryNow(by: string): void {
    if (typeof by !== 'string' || by.trim() === '')
      throw refuse('InvalidEvent', 'OperatorRetry needs an operator');
    this.requireState(['Pending'], 'OperatorRetry');
    if (this.s.scheduledFor === null || this.s.scheduledFor.getTime() <= this.now.getTime()) {
      throw refuse(
        'NotAllowedInState',
        'OperatorRetry: the order is already due; there is no back-off to skip',
      );
    }
    this.s.scheduledFor = this.now;
    this.s.completeBy = addSeconds(this.now, this.policy.claimTimeoutSeconds);
    this.s.updatedAt = this.now;
    this.commands.push(notifyCommand(this.s, this.now));
  }

  cancel(by: string, reason: string | undefined): void {
    if (typeof by !== 'string' || by.trim() === '')
      throw refuse('InvalidEvent', 'OperatorCancel needs an operator');
    this.requireState(['Pending', 'Processing'], 'OperatorCancel');
    this.startCompensation('cancelled', false, clip(`cancelled by ${by}${reason ? `: ${reason}` : ''}`));
  }

  private processed(): void {
    this.s.processState = 'Processed';
    this.s.lockedBy = null;
    this.s.completeBy = null;
    this.commands.push(statusCommand(this.s, 'processed', this.now));
  }

  /** The step's own complete-by window, capped by the policy's (see StepDeclaration). */
  private stepTimeout(i: number): number {
    return stepTimeoutSeconds(this.workflow.steps[i], this.policy.stepTimeoutSeconds);
  }

  private dispatchDo(i: number): void {
    const step = this.s.steps[i];
    const def = this.workflow.steps[i];
    step.status = 'Running';
    step.attempt += 1;
    step.stalledAttempt = null;
    step.startedAt = this.now;
    step.waitingSince = null;
    step.reference = null;
    if (completionOf(def) === 'approval') {
      // No Agent: the wait begins now. The order's complete-by is the escalation, the step's the decision.
      step.waitingSince = this.now;
      step.completeBy = waitCompleteBy(def, this.now);
      this.s.completeBy = escalationAt(def, step.completeBy);
      return;
    }
    step.completeBy = addSeconds(this.now, this.stepTimeout(i));
    this.s.completeBy = step.completeBy;
    this.commands.push(dispatchCommand(this.workflow, this.s, i, 'do', 0));
  }

  /** A step that waits completes only by its callback, an operator or complete-by. */
  notWaiting(i: number): number {
    if (completionOf(this.workflow.steps[i]) !== 'reply') {
      throw refuse('InvalidEvent', `step ${this.s.steps[i].name} completes by its callback, not by a reply`);
    }
    return i;
  }

  private requireCompletion(i: number, completion: 'callback' | 'approval', what: string): void {
    if (completionOf(this.workflow.steps[i]) !== completion) {
      throw refuse('InvalidEvent', `${what}: step ${this.s.steps[i].name} is not a ${completion} step`);
    }
  }

  /** The service accepted the work (202): the wait begins, complete-by becomes the wait's own. */
  accepted(i: number, reference: string | undefined): void {
    this.requireCompletion(i, 'callback', 'StepAccepted');
    const step = this.s.steps[i];
    if (step.waitingSince)
      throw refuse('StaleAttempt', `attempt ${step.attempt} of ${step.name} is already waiting`);
    step.waitingSince = this.now;
    step.reference = reference === undefined ? null : clip(String(reference)).slice(0, 200);
    step.completeBy = waitCompleteBy(this.workflow.steps[i], this.now);
    this.s.completeBy = step.completeBy;
  }

  heartbeat(i: number): void {
    this.requireCompletion(i, 'callback', 'StepHeartbeat');
    const def = this.workflow.steps[i];
    if (!def.wait?.heartbeat) throw refuse('InvalidEvent', `step ${def.name} declares no heartbeat`);
    const step = this.s.steps[i];
    // A heartbeat before the Agent's 202 was recorded begins the wait too.
    step.waitingSince ??= this.now;
    step.completeBy = heartbeatCompleteBy(def, step.waitingSince, step.completeBy ?? this.now, this.now);
    this.s.completeBy = step.completeBy;
  }

  callbackAnswered(i: number, e: { outcome: 'succeeded' | 'failed'; error?: string }): void {
    this.requireCompletion(i, 'callback', 'CallbackAnswered');
    const step = this.s.steps[i];
    step.answer = formatAnswer({ run: this.s.run, attempt: step.attempt, outcome: e.outcome });
    if (e.outcome === 'succeeded') this.stepSucceeded(i);
    else this.stepFailed(i, e.error ?? 'refused by the service (callback)');
  }

  approvalDecided(by: string, decision: 'approve' | 'refuse', reason: string): void {
    if (typeof by !== 'string' || by.trim() === '')
      throw refuse('InvalidEvent', 'ApprovalDecided needs an operator');
    if (decision !== 'approve' && decision !== 'refuse')
      throw refuse('InvalidEvent', 'decision is approve or refuse');
    this.requireState(['Processing'], 'ApprovalDecided');
    const i = this.s.steps.findIndex((st) => st.status === 'Running');
    if (i < 0 || completionOf(this.workflow.steps[i]) !== 'approval') {
      throw refuse('NotAllowedInState', 'ApprovalDecided: the order is not waiting for an approval');
    }
    this.decideApproval(
      i,
      decision === 'approve' ? 'succeeded' : 'failed',
      clip(`refused by ${by}: ${String(reason)}`),
    );
  }

  private decideApproval(i: number, outcome: 'succeeded' | 'failed', refusal: string): void {
    const step = this.s.steps[i];
    step.answer = formatAnswer({ run: this.s.run, attempt: step.attempt, outcome });
    if (outcome === 'succeeded') this.stepSucceeded(i);
    else this.stepFailed(i, refusal);
  }

  /**
   * The order's complete-by passed while an approval waits: first the escalation (an alert; the
   * order's complete-by moves to the step's), then at the step's complete-by the declaration decides.
   */
  private approvalTimedOut(i: number): void {
    const step = this.s.steps[i];
    const def = this.workflow.steps[i];
    if (step.completeBy !== null && step.completeBy.getTime() >= this.now.getTime()) {
      this.s.completeBy = step.completeBy;
      this.commands.push({
        type: 'RaiseOperatorAlert',
        orderId: this.s.orderId,
        run: this.s.run,
        code: 'ApprovalEscalated',
        reason: `approval of step ${step.name} is due by ${step.completeBy.toISOString()}; then it is ${def.approval?.atCompleteBy === 'approve' ? 'approved' : 'refused'} automatically`,
        processState: this.s.processState,
        failureCount: this.s.failureCount,
        at: this.now,
        messageId: `${alertMessageId(this.s.orderId, 'ApprovalEscalated', this.s.run)}:${step.attempt}`,
      });
      return;
    }
    const verdict = def.approval?.atCompleteBy === 'approve' ? 'succeeded' : 'failed';
    this.decideApproval(
      i,
      verdict,
      `no operator decided by ${step.completeBy?.toISOString() ?? 'complete-by'}: refused`,
    );
  }

  private dispatchCompensation(i: number, delaySeconds: number): void {
    const step = this.s.steps[i];
    step.status = 'Compensating';
    step.compensationAttempt += 1;
    step.stalledAttempt = null;
    step.completeBy = addSeconds(this.now, delaySeconds + this.stepTimeout(i));
    this.s.completeBy = step.completeBy;
    this.s.scheduledFor = addSeconds(this.now, delaySeconds);
    this.commands.push(dispatchCommand(this.workflow, this.s, i, 'compensate', delaySeconds));
  }

  private nextToCompensate(): number {
    for (let i = this.s.steps.length - 1; i >= 0; i--) {
      const step = this.s.steps[i];
      if (compensable.includes(step.status) && stepDefinition(this.workflow, step.name)?.compensation)
        return i;
    }
    return -1;
  }

  /** Undo the steps in reverse order, one at a time; each ends Compensated, so never twice. */
  private startCompensation(reason: CompensationReason, alert = false, detail: string = reason): void {
    this.s.compensationReason = reason;
    this.s.lockedBy = null;
    this.s.scheduledFor = null;
    if (this.nextToCompensate() < 0) {
      this.finishCompensation(alert, detail);
      return;
    }
    this.s.processState = 'Compensating';
    if (alert) this.commands.push(alertCommand(this.s, this.now));
    this.commands.push(statusCommand(this.s, 'compensating', this.now, undefined, detail));
    this.dispatchCompensation(this.nextToCompensate(), 0);
  }

  private compensateNextOrFinish(): void {
    const next = this.nextToCompensate();
    if (next >= 0) this.dispatchCompensation(next, 0);
    else this.finishCompensation(false);
  }

  private finishCompensation(alert: boolean, detail?: string): void {
    this.s.lockedBy = null;
    this.s.completeBy = null;
    this.s.scheduledFor = null;
    if (this.s.compensationReason === 'gave-up') {
      this.s.processState = 'Error';
      if (alert) this.commands.push(alertCommand(this.s, this.now));
      this.commands.push(
        statusCommand(this.s, 'error', this.now, undefined, this.s.errorDetail ?? undefined),
      );
    } else {
      this.s.processState = 'Compensated';
      this.commands.push(
        statusCommand(
          this.s,
          'compensated',
          this.now,
          undefined,
          detail ?? this.s.compensationReason ?? undefined,
        ),
      );
    }
  }

  private error(code: 'CompensationFailed' | 'CompensationGaveUp', detail: string): void {
    this.s.processState = 'Error';
    this.s.lockedBy = null;
    this.s.completeBy = null;
    this.s.scheduledFor = null;
    this.s.errorCode = code;
    this.s.errorDetail = clip(detail);
    this.commands.push(alertCommand(this.s, this.now));
    this.commands.push(statusCommand(this.s, 'error', this.now, undefined, this.s.errorDetail));
  }
}
