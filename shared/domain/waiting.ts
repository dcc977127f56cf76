import { addSeconds } from './clock.js';
import type { Order } from './order.js';
import type { OrderState, StepState } from './state.js';

/**
 * Steps that wait for the outside world (issue 25). A step declares how it completes:
 * - `reply` (the default): the Agent's call is the work; its answer completes the step.
 * - `callback`: the Agent's call only starts the work. The service answers 202 with its reference
 *   and later POSTs the outcome to the step's callback URL (shared/callbacks). The step stays
 *   Running with nothing held (no function, lock or message) until the callback or complete-by.
 * - `approval`: no remote call at all; an operator decides (POST /api/orders/{id}/approval).
 * Pure rules only: no I/O, no keys (the token is signed in shared/callbacks/token.ts).
 */
export type Completion = 'reply' | 'callback' | 'approval';

export interface WaitDeclaration {
  /** How long the step may wait once its wait has begun (the service's 202, an approval's dispatch). */
  readonly completeBySeconds: number;
  /**
   * A service that reports progress: each heartbeat moves complete-by to `intervalSeconds` from
   * now, never past `maxSeconds` from the start of the wait. Without heartbeats the step times
   * out at its heartbeat deadline.
   */
  readonly heartbeat?: { readonly intervalSeconds: number; readonly maxSeconds: number };
}

export interface ApprovalDeclaration {
  /** Orders whose amount is at or below this need no approval (the step is waived at submission). */
  readonly aboveAmount: number;
  /** The operators are alerted this long before complete-by (escalation). */
  readonly escalateBeforeSeconds: number;
  /** What complete-by decides when no operator has. */
  readonly atCompleteBy: 'approve' | 'refuse';
}

/** The waiting part of a step declaration (workflow.ts extends it). */
export interface WaitingStep {
  readonly name: string;
  readonly completion?: Completion;
  readonly wait?: WaitDeclaration;
  readonly approval?: ApprovalDeclaration;
}

export function completionOf(step: WaitingStep | undefined): Completion {
  return step?.completion ?? 'reply';
}

/** A step whose outcome comes from outside the Agent's call: a callback, or an operator. */
export function waits(step: WaitingStep | undefined): boolean {
  return completionOf(step) !== 'reply';
}

/** Why a declaration is wrong, or undefined. Checked once at module load (workflow.ts). */
export function waitDeclarationProblem(step: WaitingStep): string | undefined {
  const completion = completionOf(step);
  if (!['reply', 'callback', 'approval'].includes(completion)) return `unknown completion "${completion}"`;
  if (completion === 'reply') {
    if (step.wait || step.approval) return 'wait and approval need completion callback or approval';
    return undefined;
  }
  const wait = step.wait;
  if (!wait || !isPositive(wait.completeBySeconds))
    return `completion ${completion} needs wait.completeBySeconds`;
  if (wait.heartbeat) {
    const { intervalSeconds, maxSeconds } = wait.heartbeat;
    if (!isPositive(intervalSeconds) || !isPositive(maxSeconds))
      return 'heartbeat needs positive intervalSeconds and maxSeconds';
    if (maxSeconds < wait.completeBySeconds)
      return 'heartbeat.maxSeconds must be at least wait.completeBySeconds';
    if (intervalSeconds > maxSeconds) return 'heartbeat.intervalSeconds must not exceed maxSeconds';
  }
  if (completion === 'approval') {
    const a = step.approval;
    if (!a) return 'completion approval needs an approval declaration';
    if (wait.heartbeat) return 'an approval has no heartbeat';
    if (!(a.aboveAmount >= 0)) return 'approval.aboveAmount must be a number >= 0';
    if (!Number.isInteger(a.escalateBeforeSeconds) || a.escalateBeforeSeconds < 0) {
      return 'approval.escalateBeforeSeconds must be an integer >= 0';
    }
    if (a.escalateBeforeSeconds >= wait.completeBySeconds) return 'approval escalates before the wait begins';
    if (a.atCompleteBy !== 'approve' && a.atCompleteBy !== 'refuse')
      return 'approval.atCompleteBy must be approve or refuse';
  } else if (step.approval) return 'approval needs completion approval';
  return undefined;
}

function isPositive(n: number | undefined): boolean {
  return Number.isInteger(n) && (n as number) >= 1;
}

/** The longest a step can wait from the start of its wait: heartbeats may extend it to the max. */
export function longestWaitSeconds(step: WaitingStep): number {
  const wait = step.wait;
  if (!wait) return 0;
  return Math.max(wait.completeBySeconds, wait.heartbeat?.maxSeconds ?? 0);
}

/** Complete-by when a wait begins at `now`: the heartbeat deadline when heartbeats are declared. */
export function waitCompleteBy(step: WaitingStep, now: Date): Date {
  const wait = step.wait!;
  return addSeconds(
    now,
    wait.heartbeat
      ? Math.min(wait.heartbeat.intervalSeconds, wait.completeBySeconds)
      : wait.completeBySeconds,
  );
}

/**
 * A heartbeat at `now`: the next heartbeat deadline, never past the max from the start of the
 * wait, never earlier than the complete-by already recorded (heartbeats only move it forward).
 */
export function heartbeatCompleteBy(step: WaitingStep, waitingSince: Date, current: Date, now: Date): Date {
  const hb = step.wait!.heartbeat!;
  const next = Math.min(
    now.getTime() + hb.intervalSeconds * 1000,
    waitingSince.getTime() + hb.maxSeconds * 1000,
  );
  return new Date(Math.max(next, current.getTime()));
}

/** When an approval's operators are alerted: escalateBeforeSeconds before its complete-by. */
export function escalationAt(step: WaitingStep, completeBy: Date): Date {
  return addSeconds(completeBy, -(step.approval?.escalateBeforeSeconds ?? 0));
}

/** What an order costs: the sum of its lines, in the order's currency. */
export function orderAmount(order: Pick<Order, 'items'>): number {
  const cents = order.items.reduce((sum, i) => sum + Math.round(i.quantity * i.unitPrice * 100), 0);
  return cents / 100;
}

/** The approval steps an order does not need (its amount is at or below the step's threshold). */
export function waivedSteps(steps: readonly WaitingStep[], order: Pick<Order, 'items'>): string[] {
  const amount = orderAmount(order);
  return steps
    .filter((s) => completionOf(s) === 'approval' && amount <= (s.approval?.aboveAmount ?? Infinity))
    .map((s) => s.name);
}

/** The answer a step recorded for one attempt: `run:attempt:outcome` (see StepState.answer). */
export interface RecordedAnswer {
  run: number;
  attempt: number;
  outcome: 'succeeded' | 'failed';
}

export function formatAnswer(a: RecordedAnswer): string {
  return `${a.run}:${a.attempt}:${a.outcome}`;
}

export function parseAnswer(text: string | null): RecordedAnswer | null {
  const m = text === null ? null : /^(\d+):(\d+):(succeeded|failed)$/.exec(text);
  return m ? { run: Number(m[1]), attempt: Number(m[2]), outcome: m[3] as RecordedAnswer['outcome'] } : null;
}

/** What a callback names: the order, step, run and attempt its token was minted for. */
export interface CallbackTarget {
  orderId: string;
  step: string;
  run: number;
  attempt: number;
}

/**
 * How the callback route answers a valid token, decided from the recorded state alone:
 * - `apply`: the attempt is the one running now: the outcome is applied (202);
 * - `duplicate`: this attempt's same outcome was applied already (200, nothing changes);
 * - `moved-on`: the attempt is no longer current (timed out and retried, cancelled, another
 *   outcome applied, resubmitted): the late answer goes to the history and changes nothing (409).
 */
export type CallbackVerdict = 'apply' | 'duplicate' | 'moved-on';

export function callbackVerdict(
  state: OrderState,
  target: CallbackTarget,
  outcome: 'succeeded' | 'failed' | 'heartbeat',
): CallbackVerdict {
  const step = state.steps.find((s) => s.name === target.step);
  if (!step) return 'moved-on';
  if (isCurrentAttempt(state, step, target)) return 'apply';
  const answer = parseAnswer(step.answer ?? null);
  if (
    outcome !== 'heartbeat' &&
    answer !== null &&
    answer.run === target.run &&
    answer.attempt === target.attempt &&
    answer.outcome === outcome
  ) {
    return 'duplicate';
  }
  return 'moved-on';
}

export function isCurrentAttempt(
  state: OrderState,
  step: StepState,
  target: { run: number; attempt: number },
): boolean {
  return (
    state.processState === 'Processing' &&
    step.status === 'Running' &&
    state.run === target.run &&
    step.attempt === target.attempt
  );
}

/** The step an order is waiting on (a callback or an operator), if any. */
export function waitingStep(state: OrderState): StepState | undefined {
  if (state.processState !== 'Processing') return undefined;
  return state.steps.find((s) => s.status === 'Running' && s.waitingSince != null);
}
