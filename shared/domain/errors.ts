/**
 * Why an event was not applied. The state is unchanged in every case.
 * - StaleAttempt: a reply for an attempt (or run) that is no longer current, or a duplicate;
 *   the Scheduler drops it (after healing with outstandingCommands).
 * - NotAllowedInState: the event makes no sense in the current process state.
 * - NotExpired: TimedOut while the complete-by has not passed (another writer moved the order).
 * - UnknownStep / InvalidEvent: malformed input.
 * - WorkflowRetired: the order is finished and its workflow version is no longer held (an
 *   unfinished order in that case moves to Error instead: see transition.ts).
 * - NoSuchOrder / AlreadySubmitted: Submit against existing state, anything else against none.
 */
export type RefusalCode =
  | 'StaleAttempt'
  | 'NotAllowedInState'
  | 'NotExpired'
  | 'UnknownStep'
  | 'InvalidEvent'
  | 'WorkflowRetired'
  | 'NoSuchOrder'
  | 'AlreadySubmitted';

export class TransitionRefused extends Error {
  constructor(
    public readonly code: RefusalCode,
    message: string,
  ) {
    super(`${code}: ${message}`);
    this.name = 'TransitionRefused';
  }
}

export function isTransitionRefused(e: unknown, code?: RefusalCode): e is TransitionRefused {
  return e instanceof TransitionRefused && (code === undefined || e.code === code);
}
