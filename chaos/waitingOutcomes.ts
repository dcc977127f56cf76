import {
  completionOf,
  orderAmount,
  stepDefinition,
  type HistoryEntry,
  type Order,
  type OrderState,
  type Workflow,
} from '../shared/domain/index.js';

/**
 * Invariant 8 (docs/reliability.md, issue 25): a waiting step's outcome comes only from a valid callback, an operator's
 * decision or a timeout. Read from the order's history rows (each written in the same transaction
 * as the state it describes):
 * - no Agent reply (`StepSucceeded`, `StepFailed`) ever names a waiting step;
 * - a callback step that ended with an outcome (Completed, Failed, or undone after one) has a
 *   `CallbackAnswered` row for that step, or was timed out (`TimedOut`) or cancelled by an operator;
 *   a Completed or Failed one has exactly one `CallbackAnswered` row for its final run and attempt
 *   (the route applies an attempt's outcome once; duplicates are 200s that write nothing);
 * - an approval step that ended with an outcome has an `ApprovalDecided` row (an operator), a
 *   `TimedOut` row in its run after its wait began (the declaration's default at complete-by), an
 *   operator's cancel, or was waived at submission (attempt 0, the order's amount at or below
 *   the step's threshold).
 * Pure: the caller loads the state, the order and the history.
 */
export interface WaitingOutcomeInput {
  workflow: Workflow;
  state: OrderState;
  /** The order's document (for a waived approval's amount); undefined when not loaded. */
  order?: Pick<Order, 'items'>;
  history: readonly HistoryEntry[];
}

const replyEvents = new Set(['StepSucceeded', 'StepFailed']);
/** Statuses a step reaches only after it had an outcome (or was undone after one). */
const decided = new Set(['Completed', 'Failed', 'Compensating', 'Compensated', 'CompensationFailed']);

export function waitingOutcomeViolations(input: WaitingOutcomeInput): string[] {
  const { workflow, state, history } = input;
  const problems: string[] = [];
  const cancelled = history.some((h) => h.event === 'OperatorCancel' && h.actor === 'operator');
  for (const step of state.steps) {
    const def = stepDefinition(workflow, step.name);
    const completion = completionOf(def);
    if (!def || completion === 'reply') continue;
    const mine = history.filter((h) => h.step === step.name);
    for (const h of mine.filter((e) => replyEvents.has(e.event))) {
      problems.push(
        `${state.orderId} ${step.name}: ${h.event} (run ${h.run}, attempt ${h.attempt}) decided a ${completion} step`,
      );
    }
    if (!decided.has(step.status)) continue;
    const timedOut = history.some(
      (h) =>
        h.event === 'TimedOut' &&
        h.actor === 'supervisor' &&
        (h.run === undefined || h.run === step.run) &&
        (step.startedAt === null || h.at.getTime() >= step.startedAt.getTime()),
    );
    if (completion === 'callback') {
      const answered = mine.filter((h) => h.event === 'CallbackAnswered');
      const finalAnswers = answered.filter((h) => h.run === step.run && h.attempt === step.attempt);
      if (step.status === 'Completed' || step.status === 'Failed') {
        if (finalAnswers.length !== 1)
          problems.push(
            `${state.orderId} ${step.name}: ${step.status} at run ${step.run} attempt ${step.attempt} with ${finalAnswers.length} CallbackAnswered rows for it (expected 1)`,
          );
      } else if (answered.length === 0 && !timedOut && !cancelled) {
        problems.push(
          `${state.orderId} ${step.name}: ${step.status} without a callback, a timeout or an operator's cancel`,
        );
      }
      continue;
    }
    // approval
    const byOperator = history.some((h) => h.event === 'ApprovalDecided' && h.actor === 'operator' && h.by);
    const threshold = def.approval?.aboveAmount ?? Infinity;
    const waived = step.attempt === 0 && (input.order === undefined || orderAmount(input.order) <= threshold);
    if (!byOperator && !timedOut && !cancelled && !waived) {
      problems.push(
        `${state.orderId} ${step.name}: ${step.status} (attempt ${step.attempt}) without an operator's decision, a timeout or a waiver`,
      );
    }
  }
  return problems;
}
