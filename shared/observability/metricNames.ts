/**
 * The OpenTelemetry meter and instrument names the app emits (issue 16; docs/operations.md lists them). Azure
 * Monitor stores each instrument as customMetrics rows under this name, so the alerts and the
 * workbook in infra/ query them by these strings; test/infra/observability.test.ts fails when
 * infra/ names a metric that is not here. Names only: the instruments are created elsewhere.
 */
export const meterName = 'order-processing';

export const metricNames = {
  /** Counter: orders accepted by the submission endpoint. */
  ordersSubmitted: 'orders.submitted',
  /** Counter, attribute `state` (Processed, Compensated, Error): orders that reached an end state. */
  ordersTerminal: 'orders.terminal',
  /** Histogram (ms), attributes `step`, `outcome`. */
  stepDuration: 'step.duration',
  /** Counter, attribute `step`: every attempt at a step, first ones included. */
  stepAttempts: 'step.attempts',
  /** Counter, attribute `step`: steps the Supervisor found past their complete-by time. */
  stepTimeouts: 'step.timeouts',
  /** Counter: orders the Supervisor gave up on (hard threshold reached). */
  ordersGivenUp: 'orders.given_up',
  /** Counter: compensations started. */
  ordersCompensations: 'orders.compensations',
  /** Counter, attributes `service`, `kind` (`refusal` | `operational`). */
  remoteFailures: 'remote.failures',
  /** Gauge, from the Supervisor's sweep. */
  ordersInFlight: 'orders.in_flight',
  /** Gauge (seconds), from the Supervisor's sweep. */
  ordersOldestInFlightAge: 'orders.oldest_in_flight_age',
  /** Gauge, attribute `entity`: dead-lettered messages per queue or subscription. */
  deadLetters: 'deadletters',
  /** UpDownCounter, attribute `step`: steps waiting for a callback or an operator (waitingMetrics.ts). */
  stepsWaiting: 'steps.waiting',
  /** UpDownCounter, attribute `step`: approval steps waiting for an operator. */
  approvalsPending: 'approvals.pending',
  /** Counter, attributes `verdict` (applied, duplicate, moved-on), `kind` (outcome, heartbeat). */
  callbacksReceived: 'callbacks.received',
  /** Counter, attribute `reason`: callbacks refused (forged, expired, malformed, bad-body, too-large). */
  callbacksRefused: 'callbacks.refused',
  /** Counter, attributes `service`, `reason` (paused, rate, concurrency, no-grant, share): requests sent back to wait for a call slot (callBudgetMetrics.ts). */
  callWaits: 'remote.call_waits',
  /** Counter, attribute `service`: pauses of a service's calls on its 429/503. */
  callPauses: 'remote.call_pauses',
  /** Gauge (calls/s), attribute `service`, per instance at each lease renewal: the rate it may start. */
  callRate: 'remote.call_rate',
  /** Gauge, attribute `service`, per instance: the calls it may have in flight. */
  callConcurrency: 'remote.call_concurrency',
  /** Gauge, attribute `service`, per instance: requests waiting for a call slot. */
  callsWaiting: 'remote.calls_waiting',
  /** Gauge (seconds), attribute `service`, per instance: how long the oldest of them has waited. */
  oldestCallWaitAge: 'remote.oldest_waiting_age',
} as const;

export type MetricName = (typeof metricNames)[keyof typeof metricNames];
