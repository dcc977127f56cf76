/**
 * Deterministic identifiers. Message ids let Service Bus duplicate detection absorb re-sends;
 * idempotency keys let remote services absorb repeated calls.
 *
 * The run is part of both once an operator has resubmitted: a refunded run-1 charge must not
 * dedupe the run-2 charge, and attempt numbers restart with each run.
 */
const runSuffix = (run: number): string => (run > 1 ? `:run${run}` : '');

export function actionIdempotencyKey(orderId: string, step: string, run: number): string {
  return `${orderId}:${step}${runSuffix(run)}`;
}

/**
 * The undo's key names the action's run and, when a later run does the undo (an operator
 * resubmitted after the service refused the first undo), that run too: a provider that caches
 * answers per key would otherwise answer the new undo with the old refusal forever.
 */
export function compensationIdempotencyKey(
  orderId: string,
  step: string,
  run: number,
  undoRun: number = run,
): string {
  const later = undoRun !== run ? runSuffix(undoRun) : '';
  return `${actionIdempotencyKey(orderId, step, run)}:compensate${later}`;
}

export function dispatchMessageId(
  orderId: string,
  step: string,
  attempt: number,
  kind: 'do' | 'compensate',
  run: number,
): string {
  return `${orderId}:${step}:${attempt}:${kind}${runSuffix(run)}`;
}

export function processOrderMessageId(orderId: string, reason: string, n: number, run: number): string {
  return `${orderId}:process:${reason}:${n}${runSuffix(run)}`;
}

export function statusMessageId(orderId: string, event: string, run: number, step?: string): string {
  return `${orderId}:status:${event}${step ? `:${step}` : ''}${runSuffix(run)}`;
}

export function alertMessageId(orderId: string, code: string, run: number): string {
  return `${orderId}:alert:${code}${runSuffix(run)}`;
}
