/** What can happen to an order. Replies name the run and attempt they answer. */
export type OrderEvent =
  | { type: 'Submit'; orderId: string }
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
  /** Skip the back-off of a Pending order: it is due now and its claim goes out now. */
  | { type: 'OperatorRetry'; by: string };
