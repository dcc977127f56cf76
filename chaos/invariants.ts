import {
  actionIdempotencyKey,
  completionOf,
  isTerminal,
  orderWorkflowVersions,
  stepDefinition,
  workflowLabel,
  workflowOf,
  type HistoryEntry,
  type Order,
  type OrderState,
  type ProcessState,
  type Workflow,
} from '../shared/domain/index.js';
import { serviceForOperation, type RemoteAction } from '../shared/agents/remoteOperations.js';
import type { LedgerSnapshot } from '../local/remoteServices/index.js';
import type { ChaosContext, PeekedMessage } from './harness.js';
import { chaosWorkflows } from './versionedApp.js';
import { waitingOutcomeViolations } from './waitingOutcomes.js';

/** The order's version: the chaos run's test versions, else the product's (order@2 with waiting steps). */
function versionOf(state: OrderState): Workflow | undefined {
  return workflowOf(chaosWorkflows, state) ?? workflowOf(orderWorkflowVersions, state);
}

/**
 * The six invariants of DESIGN.md, checked after a scenario has drained. Each failure is one
 * violation with a line that says which order and what was seen.
 */
export interface CheckInput {
  ctx: ChaosContext;
  finals: Map<string, OrderState>;
  /** Every order id in the Orders table. */
  stored: Set<string>;
  /** Process states seen per order while the scenario ran, in order. */
  observed: Map<string, ProcessState[]>;
  deadLetters: PeekedMessage[];
  alerts: PeekedMessage[];
  boundSeconds: number;
  /** History (and order document) of each order with waiting steps, for invariant 8 (docs/reliability.md). */
  waiting?: Map<string, { order?: Pick<Order, 'items'>; history: HistoryEntry[] }>;
}

export interface CheckResult {
  orders: number;
  terminal: number;
  lost: number;
  phantoms: number;
  duplicateEffects: number;
  compensationFaults: number;
  /** Compensations of an in-doubt step whose action never happened: allowed by design. */
  tombstones: number;
  /** Undone at the service, but the reply was lost and the order went to Error with an alert. */
  inDoubtCompensations: number;
  transitionFaults: number;
  deadLettered: number;
  deadLetterFaults: number;
  worstSeconds: number;
  byState: Record<string, number>;
  /** Waiting steps whose outcome came from anything but a callback, an operator or a timeout. */
  waitingFaults?: number;
  violations: string[];
}

type ServiceName = 'inventory' | 'payment' | 'shipping';

export function checkInvariants(input: CheckInput): CheckResult {
  const { ctx, finals } = input;
  const violations: string[] = [];
  const result: CheckResult = {
    orders: ctx.submitted.size,
    terminal: 0,
    lost: 0,
    phantoms: 0,
    duplicateEffects: 0,
    compensationFaults: 0,
    tombstones: 0,
    inDoubtCompensations: 0,
    transitionFaults: 0,
    deadLettered: input.deadLetters.length,
    deadLetterFaults: 0,
    worstSeconds: 0,
    byState: {},
    violations,
  };
  const ledgers = ctx.ledgers();

  // 1. No lost order: every 202'd order terminal, within the bound.
  for (const sub of ctx.submitted.values()) {
    const state = finals.get(sub.orderId);
    if (!state || !isTerminal(state.processState)) {
      result.lost += 1;
      violations.push(`lost: ${sub.orderId} is ${state?.processState ?? 'missing'} after the drain`);
      continue;
    }
    result.terminal += 1;
    result.byState[state.processState] = (result.byState[state.processState] ?? 0) + 1;
    const seconds = (state.updatedAt.getTime() - sub.at) / 1000;
    result.worstSeconds = Math.max(result.worstSeconds, seconds);
    if (seconds > input.boundSeconds) {
      result.lost += 1;
      violations.push(`late: ${sub.orderId} took ${seconds.toFixed(1)}s > bound ${input.boundSeconds}s`);
    }
  }

  // 2. No phantom order.
  for (const orderId of input.stored) {
    if (ctx.seeded.has(orderId)) continue;
    if (!ctx.attempted.has(orderId)) {
      result.phantoms += 1;
      violations.push(`phantom: ${orderId} is in the Orders table but was never submitted`);
    } else if (!ctx.submitted.has(orderId)) {
      violations.push(
        `unacknowledged: ${orderId} was stored but its client never got a 202 in a minute of retries`,
      );
    }
  }

  // 3 and 4: the remote services' ledgers against the recorded states.
  for (const [orderId, state] of finals) {
    const steps = checkOrderEffects(orderId, state, ledgers);
    result.duplicateEffects += steps.duplicates;
    result.compensationFaults += steps.compensationFaults;
    result.tombstones += steps.tombstones;
    result.inDoubtCompensations += steps.inDoubtCompensations;
    violations.push(...steps.violations);
  }
  // An effect for an order nobody submitted would be a phantom at the service.
  for (const service of Object.keys(ledgers) as ServiceName[]) {
    for (const e of ledgers[service].effects) {
      if (!ctx.attempted.has(e.orderId)) {
        result.phantoms += 1;
        violations.push(`phantom effect: ${service} ${e.operation} for unknown order ${e.orderId}`);
      }
    }
  }

  // 5. Only allowed transitions: final states plausible, and nothing observed leaving a terminal state.
  for (const [orderId, state] of finals) {
    const problems = [...plausible(state), ...observedTransitions(input.observed.get(orderId) ?? [])];
    result.transitionFaults += problems.length;
    for (const p of problems) violations.push(`transition: ${orderId} ${p}`);
  }

  // 6. Every dead-lettered message's order terminal or in front of an operator.
  const alerted = new Set(input.alerts.map((a) => a.orderId).filter(Boolean));
  for (const m of input.deadLetters) {
    const state = m.orderId ? finals.get(m.orderId) : undefined;
    const ok =
      (state !== undefined && isTerminal(state.processState)) ||
      (m.orderId !== undefined && alerted.has(m.orderId));
    if (!ok) {
      result.deadLetterFaults += 1;
      violations.push(
        `dead letter: ${m.entity} ${m.messageId ?? '?'} (order ${m.orderId ?? 'unknown'}, ${m.deadLetterReason ?? 'no reason'}) neither terminal nor alerted`,
      );
    }
  }
  // An order in Error must have reached an operator (the alert queue; the state itself is listed too).
  for (const [orderId, state] of finals) {
    if (state.processState === 'Error' && !alerted.has(orderId)) {
      violations.push(
        `alert: ${orderId} is Error (${state.errorCode ?? '?'}) but no operator alert was found`,
      );
      result.deadLetterFaults += 1;
    }
  }
  // 8. A waiting step's outcome comes only from a valid callback, an operator or a timeout.
  // Only for callers that read the histories (run.ts); others (the bench) do not check it.
  for (const [orderId, state] of input.waiting ? finals : []) {
    const workflow = versionOf(state);
    const loaded = input.waiting?.get(orderId);
    if (!workflow || !workflow.steps.some((d) => completionOf(d) !== 'reply')) continue;
    if (!loaded) {
      violations.push(`waiting: ${orderId} has waiting steps but its history was not read`);
      continue;
    }
    const problems = waitingOutcomeViolations({ workflow, state, ...loaded });
    result.waitingFaults = (result.waitingFaults ?? 0) + problems.length;
    for (const p of problems) violations.push(`waiting: ${p}`);
  }
  return result;
}

/** Whether an order's version has waiting steps (its history is then read for invariant 8). */
export function hasWaitingSteps(state: OrderState): boolean {
  return versionOf(state)?.steps.some((d) => completionOf(d) !== 'reply') ?? false;
}

interface OrderEffects {
  duplicates: number;
  compensationFaults: number;
  tombstones: number;
  inDoubtCompensations: number;
  violations: string[];
}

/**
 * For one order: at most one effect per step (3); compensations once, only for steps whose action
 * took effect (or a tombstone for an in-doubt step), in reverse order (4); and what the order's
 * final state says about its steps matches the services' ledgers.
 */
function checkOrderEffects(
  orderId: string,
  state: OrderState,
  ledgers: Record<ServiceName, LedgerSnapshot>,
): OrderEffects {
  const out: OrderEffects = {
    duplicates: 0,
    compensationFaults: 0,
    tombstones: 0,
    inDoubtCompensations: 0,
    violations: [],
  };
  const compensationTimes: Array<{ index: number; at: number }> = [];
  // The order's own version, its steps matched by name: a step's effects are those under its keys.
  const workflow = versionOf(state);
  if (!workflow) {
    out.violations.push(
      `${orderId}: ${workflowLabel({ name: state.workflow, version: state.workflowVersion })} unknown`,
    );
    return out;
  }
  state.steps.forEach((step, index) => {
    const def = stepDefinition(workflow, step.name)!;
    // An approval calls no service: it has no effects to count.
    if (completionOf(def) === 'approval') return;
    const service = serviceForOperation(def.action as RemoteAction);
    const ledger = ledgers[service];
    const stepKeys = new Set(
      Array.from({ length: state.run }, (_, r) => actionIdempotencyKey(orderId, step.name, r + 1)),
    );
    const effects = ledger.effects.filter((e) => e.orderId === orderId && stepKeys.has(e.idempotencyKey));
    // One key per run (keys.ts); the ledger absorbs repeats of a key, so a second key for the
    // same run, or a second record under one key, is a second charge.
    const keys = new Set(effects.map((e) => e.idempotencyKey));
    const extra = effects.length - keys.size + Math.max(0, keys.size - state.run);
    if (extra > 0) {
      out.duplicates += extra;
      out.violations.push(`duplicate effect: ${orderId} ${step.name} ${def.action} x${effects.length}`);
    }
    const compensations = ledger.compensations.filter(
      (c) => c.orderId === orderId && stepKeys.has(c.originalIdempotencyKey),
    );
    const real = compensations.filter((c) => !c.tombstone);
    const tombstones = compensations.filter((c) => c.tombstone);
    out.tombstones += tombstones.length;
    if (compensations.length > 1) {
      out.compensationFaults += 1;
      out.violations.push(`compensation twice: ${orderId} ${step.name} x${compensations.length}`);
    }
    for (const c of compensations) compensationTimes.push({ index, at: Date.parse(c.compensatedAt) });
    const effected = effects.length > 0;
    const undone = real.length > 0;
    const fail = (what: string): void => {
      out.compensationFaults += 1;
      out.violations.push(`compensation: ${orderId} ${step.name}: ${what}`);
    };
    // Never compensate a step that was never dispatched or that the service refused.
    if (compensations.length > 0 && (step.status === 'NotStarted' || step.status === 'Failed')) {
      fail(`compensated although the step is ${step.status}`);
    }
    if (step.status === 'Failed' && effected) fail('an effect exists for a step recorded Failed');
    switch (state.processState) {
      case 'Processed':
        if (!effected || undone || tombstones.length > 0)
          fail(`order Processed but effect=${effected} compensated=${undone} tombstone=${tombstones.length}`);
        break;
      case 'Compensated':
        // Every effect must have been undone: a Compensated order with a live charge is a loss.
        if (effected && !undone) fail('order Compensated but the effect was never undone');
        break;
      case 'Error':
        // Undone steps must say so; a step the operator must look at may keep its effect.
        if (
          effected &&
          !undone &&
          !['Completed', 'CompensationFailed', 'TimedOut', 'Running'].includes(step.status)
        )
          fail(`order Error, step ${step.status}, effect never undone`);
        if (state.errorCode === 'GaveUp' && effected && !undone)
          fail('gave up, but the effect was never undone');
        break;
      default:
        break;
    }
    // An undo whose reply never came back is recorded CompensationFailed with the order in Error
    // and an alert: in doubt, but in front of an operator, so allowed (counted as in doubt).
    const inDoubtUndo = step.status === 'CompensationFailed' && state.processState === 'Error';
    if (undone && inDoubtUndo) out.inDoubtCompensations += 1;
    else if (undone && step.status !== 'Compensated')
      fail(`undone at the service but the step is ${step.status}`);
  });
  // Reverse order: a later step is compensated no later than an earlier one.
  const sorted = [...compensationTimes].sort((a, b) => a.at - b.at || b.index - a.index);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i].index > sorted[i - 1].index) {
      out.compensationFaults += 1;
      out.violations.push(
        `compensation order: ${orderId} step ${sorted[i].index} undone after step ${sorted[i - 1].index}`,
      );
    }
  }
  return out;
}

function plausible(s: OrderState): string[] {
  const problems: string[] = [];
  const statuses = s.steps.map((st) => st.status);
  switch (s.processState) {
    case 'Processed':
      if (statuses.some((st) => st !== 'Completed'))
        problems.push(`Processed with steps ${statuses.join(',')}`);
      break;
    case 'Compensated':
      if (
        statuses.some((st) =>
          ['Completed', 'Running', 'TimedOut', 'Compensating', 'CompensationFailed'].includes(st),
        )
      )
        problems.push(`Compensated with steps ${statuses.join(',')}`);
      if (s.compensationReason === null) problems.push('Compensated without a compensation reason');
      break;
    case 'Error':
      if (s.errorCode === null) problems.push('Error without an error code');
      if (statuses.some((st) => st === 'Running' || st === 'Compensating'))
        problems.push(`Error with steps ${statuses.join(',')}`);
      break;
    default:
      break;
  }
  if (isTerminal(s.processState) && (s.lockedBy !== null || s.completeBy !== null))
    problems.push(`terminal ${s.processState} still locked or with a complete-by`);
  return problems;
}

const rank: Record<ProcessState, number> = {
  Pending: 0,
  Processing: 0,
  Compensating: 1,
  Compensated: 2,
  Processed: 2,
  Error: 2,
};

/** Sampled states can skip some, so this checks reachability: never out of a terminal state, never back from Compensating. */
function observedTransitions(seen: ProcessState[]): string[] {
  const problems: string[] = [];
  for (let i = 1; i < seen.length; i++) {
    const a = seen[i - 1];
    const b = seen[i];
    if (a === b) continue;
    if (isTerminal(a)) problems.push(`left terminal ${a} for ${b}`);
    else if (rank[b] < rank[a]) problems.push(`went back from ${a} to ${b}`);
  }
  return problems;
}
