import type { Counter, Gauge, Histogram } from '@opentelemetry/api';
import { lazyInstruments } from './instruments.js';
import { metricNames } from './metricNames.js';
import {
  isTerminal,
  outstandingStep,
  type Command,
  type OrderEvent,
  type OrderState,
} from '../domain/index.js';

/**
 * The app's metrics (names shared with the Bicep alerts and the workbook, see docs/operations.md):
 * meter `order-processing`. Instruments are made on first use from the global meter provider, so
 * with telemetry off they are the API's no-ops.
 */
export { meterName } from './metricNames.js';

interface Instruments {
  submitted: Counter;
  terminal: Counter;
  stepDuration: Histogram;
  stepAttempts: Counter;
  stepTimeouts: Counter;
  givenUp: Counter;
  compensations: Counter;
  remoteFailures: Counter;
  inFlight: Gauge;
  oldestInFlightAge: Gauge;
  deadLetters: Gauge;
}

const instruments = lazyInstruments((meter): Instruments => ({
  submitted: meter.createCounter(metricNames.ordersSubmitted, {
    description: 'Orders accepted (new, not replays)',
  }),
  terminal: meter.createCounter(metricNames.ordersTerminal, {
    description: 'Orders that reached a terminal state',
  }),
  stepDuration: meter.createHistogram(metricNames.stepDuration, {
    description: "An Agent's remote call for one step, all its HTTP attempts",
    unit: 'ms',
  }),
  stepAttempts: meter.createCounter(metricNames.stepAttempts, {
    description: 'Step requests dispatched to Agents',
  }),
  stepTimeouts: meter.createCounter(metricNames.stepTimeouts, {
    description: 'Steps whose complete-by passed',
  }),
  givenUp: meter.createCounter(metricNames.ordersGivenUp, {
    description: 'Orders the Supervisor stopped retrying',
  }),
  compensations: meter.createCounter(metricNames.ordersCompensations, {
    description: 'Orders that started compensating',
  }),
  remoteFailures: meter.createCounter(metricNames.remoteFailures, {
    description: 'Remote calls that failed: business refusals vs operational failures',
  }),
  inFlight: meter.createGauge(metricNames.ordersInFlight, {
    description: 'Orders not yet terminal (Supervisor sweep)',
  }),
  oldestInFlightAge: meter.createGauge(metricNames.ordersOldestInFlightAge, {
    description: 'Age of the oldest order not yet terminal (Supervisor sweep)',
    unit: 's',
  }),
  deadLetters: meter.createGauge(metricNames.deadLetters, { description: 'Messages in a dead-letter queue' }),
}));

export function recordSubmitted(): void {
  instruments().submitted.add(1);
}

/**
 * What one applied transition means for the counters: a terminal state reached, a compensation
 * started, a timeout (and whether the Supervisor gave up), and each step request dispatched.
 */
export function recordTransition(
  before: OrderState,
  event: OrderEvent,
  after: OrderState,
  commands: readonly Command[],
): void {
  const i = instruments();
  if (!isTerminal(before.processState) && isTerminal(after.processState))
    i.terminal.add(1, { state: after.processState });
  if (before.processState !== 'Compensating' && after.processState === 'Compensating') i.compensations.add(1);
  if (event.type === 'TimedOut') {
    const step = outstandingStep(before)?.step;
    if (step !== undefined) i.stepTimeouts.add(1, { step });
    // Out of retries: the step (GaveUp) or its compensation (CompensationGaveUp).
    const gaveUp = after.errorCode === 'GaveUp' || after.errorCode === 'CompensationGaveUp';
    if (gaveUp && before.errorCode !== after.errorCode) i.givenUp.add(1);
  }
  for (const c of commands)
    if (c.type === 'DispatchStep' && c.kind === 'do') i.stepAttempts.add(1, { step: c.step });
}

export function recordStepCall(step: string, outcome: string, ms: number): void {
  instruments().stepDuration.record(ms, { step, outcome });
}

export function recordRemoteFailure(service: string, kind: 'refusal' | 'operational'): void {
  instruments().remoteFailures.add(1, { service, kind });
}

export function recordInFlight(count: number, oldestAgeSeconds: number): void {
  const i = instruments();
  i.inFlight.record(count);
  i.oldestInFlightAge.record(oldestAgeSeconds);
}

export function recordDeadLetters(entity: string, count: number): void {
  instruments().deadLetters.record(count, { entity });
}
