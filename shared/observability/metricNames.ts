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
} as const;

export type MetricName = (typeof metricNames)[keyof typeof metricNames];
