/** The recorded state of one order's process and its steps: what the state store persists. */

export type ProcessState = 'Pending' | 'Processing' | 'Processed' | 'Compensating' | 'Compensated' | 'Error';

/**
 * - TimedOut: the last attempt passed its complete-by without a reply and the order went back to
 *   Pending; the remote call may or may not have happened (in doubt) and will be retried.
 * - CompensationFailed: the undo was refused or given up on; an operator has to look.
 */
export type StepStatus =
  | 'NotStarted'
  | 'Running'
  | 'TimedOut'
  | 'Completed'
  | 'Failed'
  | 'Compensating'
  | 'Compensated'
  | 'CompensationFailed';

/** Why compensation started; 'gave-up' (the Supervisor's hard threshold) ends in Error. */
export type CompensationReason = 'step-failed' | 'cancelled' | 'gave-up';

/** Why an order is (or is heading for) Error: the operator alert's subject. */
/**
 * WorkflowRetired: an event arrived for an order whose workflow version this app no longer holds;
 * the order stops where it is (nothing is undone) and an operator decides.
 */
export type ErrorCode = 'GaveUp' | 'CompensationFailed' | 'CompensationGaveUp' | 'WorkflowRetired';

export interface StepState {
  name: string;
  status: StepStatus;
  /** The run whose idempotency key this step's action carries (see keys.ts). */
  run: number;
  /** Attempts of the action in this run; a reply must name the current one. */
  attempt: number;
  compensationAttempt: number;
  completeBy: Date | null;
  lastError: string | null;
  startedAt: Date | null;
  completedAt: Date | null;
  compensatedAt: Date | null;
  /**
   * The current attempt (do or undo) when its Agent reported an operational failure (a `stalled`
   * reply): its timeout is then retried without spending the failure budget. Null otherwise.
   */
  stalledAttempt: number | null;
  /** Stalled action attempts that timed out in this run (they do not count as failures). */
  stalls: number;
  /** Stalled undo attempts that timed out in this run (they do not count towards giving up). */
  undoStalls: number;
  /** A waiting step (waiting.ts): when its wait began (the service's 202, an approval's dispatch). */
  waitingSince?: Date | null;
  /** The service's reference for the work it accepted (its 202 answer). */
  reference?: string | null;
  /** The outcome a callback or an operator gave, `run:attempt:outcome` (duplicates are told by it). */
  answer?: string | null;
}

export interface OrderState {
  orderId: string;
  /** The workflow's name and the version the order started on: it finishes on that version. */
  workflow: string;
  workflowVersion: number;
  /** 1 at submission, +1 on each operator resubmit. */
  run: number;
  processState: ProcessState;
  /** The invocation that claimed the order (the pattern's LockedBy); null when not Processing. */
  lockedBy: string | null;
  /** Deadline for whatever is outstanding; the Supervisor acts when it has passed. Null when terminal. */
  completeBy: Date | null;
  /** Timeouts of the forward steps in this run; never decreases within a run. */
  failureCount: number;
  /** When the Scheduler was asked to claim a Pending order (delayed after the soft threshold). */
  scheduledFor: Date | null;
  compensationReason: CompensationReason | null;
  errorCode: ErrorCode | null;
  errorDetail: string | null;
  createdAt: Date;
  updatedAt: Date;
  /** In workflow order. */
  steps: StepState[];
}

/** Every process state, in the order an order usually passes through them. */
export const processStates: readonly ProcessState[] = [
  'Pending',
  'Processing',
  'Processed',
  'Compensating',
  'Compensated',
  'Error',
];

export const terminalStates: readonly ProcessState[] = ['Processed', 'Compensated', 'Error'];

export function isTerminal(state: ProcessState): boolean {
  return terminalStates.includes(state);
}
