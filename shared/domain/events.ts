/** What can happen to an order. Replies name the run and attempt they answer. */
export type OrderEvent =
  | { type: 'Submit'; orderId: string }
  | { type: 'Claim'; by: string }
  | { type: 'StepSucceeded'; step: string; run: number; attempt: number }
  | { type: 'StepFailedPermanently'; step: string; run: number; attempt: number; error: string }
  | { type: 'TimedOut' }
  | { type: 'CompensationSucceeded'; step: string; run: number; attempt: number }
  | { type: 'CompensationFailed'; step: string; run: number; attempt: number; error: string }
  | { type: 'OperatorResubmit'; by: string }
  | { type: 'OperatorCancel'; by: string; reason?: string };

export type OrderEventType = OrderEvent['type'];

export const orderEventTypes: readonly OrderEventType[] = [
  'Submit',
  'Claim',
  'StepSucceeded',
  'StepFailedPermanently',
  'TimedOut',
  'CompensationSucceeded',
  'CompensationFailed',
  'OperatorResubmit',
  'OperatorCancel',
];
