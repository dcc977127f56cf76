/** What can happen to an order. Replies name the run and attempt they answer. */
export type OrderEvent =
  /**
   * `waive`: approval steps this order does not need (its amount; waiting.ts waivedSteps).
   * `notBefore`: its customer's turn at the intake (customerIntake.ts); the Scheduler is asked
   * to claim it then, not at once.
   */
  | { type: 'Submit'; orderId: string; waive?: readonly string[]; notBefore?: Date }
  | { type: 'Claim'; by: string }
  | { type: 'StepSucceeded'; step: string; run: number; attempt: number }
  | { type: 'StepFailedPermanently'; step: string; run: number; attempt: number; error: string }
  | { type: 'TimedOut' }
  /** The Agent could not reach a verdict (credentials, route, 5xx, throttling): not a refusal. */
  | {
      type: 'StepStalled';
      step: string;
      run: number;
      attempt: number;
      kind: 'do' | 'compensate';
      detail: string;
    }
  /**
   * The Agent could not start the call yet (the service's global call budget is spent) and sent the
   * request back to its queue: the step's complete-by moves out by the wait (waiting is not failing).
   */
  | {
      type: 'StepWaiting';
      step: string;
      run: number;
      attempt: number;
      kind: 'do' | 'compensate';
      completeBy: Date;
    }
  | { type: 'CompensationSucceeded'; step: string; run: number; attempt: number }
  | { type: 'CompensationFailed'; step: string; run: number; attempt: number; error: string }
  | { type: 'OperatorResubmit'; by: string }
  | { type: 'OperatorCancel'; by: string; reason?: string }
  /** A callback step's service accepted the work (202) and will call back: the wait begins. */
  | { type: 'StepAccepted'; step: string; run: number; attempt: number; reference?: string }
  /** A waiting step's service reports progress: complete-by moves forward (up to the max). */
  | { type: 'StepHeartbeat'; step: string; run: number; attempt: number }
  /** A waiting step's service called back with its outcome (a valid token names the attempt). */
  | {
      type: 'CallbackAnswered';
      step: string;
      run: number;
      attempt: number;
      outcome: 'succeeded' | 'failed';
      error?: string;
    }
  /** An operator decided an approval step. */
  | { type: 'ApprovalDecided'; by: string; decision: 'approve' | 'refuse'; reason: string }
  /** Skip the back-off of a Pending order: it is due now and its claim goes out now. */
  | { type: 'OperatorRetry'; by: string };
