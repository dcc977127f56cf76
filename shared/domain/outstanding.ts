import type { Command } from './commands.js';
import {
  alertCommand,
  delayUntil,
  dispatchCommand,
  failedStepStatus,
  pendingCommands,
  statusCommand,
} from './commandFactory.js';
import type { OrderState } from './state.js';
import { workflowOf, type Workflows } from './workflowVersions.js';
import { completionOf } from './waiting.js';

/**
 * The messages the recorded state implies should have been sent. A process can die between the
 * state write and the sends; whoever next touches the order (a redelivered message, a duplicate,
 * a retried POST) sends these again. Message ids equal those of the original sends, so Service
 * Bus duplicate detection drops what did go out.
 */
export function outstandingCommands(workflows: Workflows, state: OrderState, now: Date): Command[] {
  // Without the order's version no request can be rebuilt; the next event moves it to Error.
  const workflow = workflowOf(workflows, state);
  const find = (status: string): number => state.steps.findIndex((s) => s.status === status);
  switch (state.processState) {
    case 'Pending':
      return pendingCommands(state, now);
    case 'Processing': {
      const i = find('Running');
      if (i < 0 || !workflow) return [];
      // A step that waits (a callback accepted, an approval) owes no request: nothing is held.
      if (state.steps[i].waitingSince != null || completionOf(workflow.steps[i]) === 'approval') {
        return stepCompletedBefore(state, i);
      }
      // The write that started step i also completed step i - 1: its event went out with it.
      return [...stepCompletedBefore(state, i), dispatchCommand(workflow, state, i, 'do', 0)];
    }
    case 'Compensating': {
      const commands: Command[] = [...failedStepStatus(state)];
      if (state.errorCode !== null) commands.push(alertCommand(state, state.updatedAt));
      commands.push(
        statusCommand(
          state,
          'compensating',
          state.updatedAt,
          undefined,
          state.compensationReason ?? undefined,
        ),
      );
      const i = find('Compensating');
      if (i >= 0 && workflow)
        commands.push(dispatchCommand(workflow, state, i, 'compensate', delayUntil(state, now)));
      return commands;
    }
    case 'Processed':
      return [
        ...stepCompletedBefore(state, state.steps.length),
        statusCommand(state, 'processed', state.updatedAt),
      ];
    case 'Compensated':
      return [
        ...failedStepStatus(state),
        statusCommand(
          state,
          'compensated',
          state.updatedAt,
          undefined,
          state.compensationReason ?? undefined,
        ),
      ];
    case 'Error':
      return [
        ...failedStepStatus(state),
        alertCommand(state, state.updatedAt),
        statusCommand(state, 'error', state.updatedAt, undefined, state.errorDetail ?? undefined),
      ];
  }
}

/**
 * The step-completed event of the step before index i, when the last write completed it. A step
 * kept Completed from an earlier run (an operator's resubmit reruns only what is not done)
 * published its event in that run; the claim that starts the next step sends none.
 */
function stepCompletedBefore(state: OrderState, i: number): Command[] {
  const previous = state.steps[i - 1];
  if (!previous || previous.status !== 'Completed') return [];
  if (previous.completedAt === null || previous.completedAt.getTime() !== state.updatedAt.getTime())
    return [];
  return [statusCommand(state, 'step-completed', previous.completedAt ?? state.updatedAt, previous.name)];
}

/**
 * The step an order is waiting on (running forward, or being undone) and that step's current
 * attempt, for logs; undefined when nothing is outstanding.
 */
export function outstandingStep(state: OrderState): { step: string; attempt: number } | undefined {
  const running = state.steps.find((s) => s.status === 'Running' || s.status === 'TimedOut');
  if (running) return { step: running.name, attempt: running.attempt };
  const undoing = state.steps.find((s) => s.status === 'Compensating');
  if (undoing) return { step: undoing.name, attempt: undoing.compensationAttempt };
  return undefined;
}
