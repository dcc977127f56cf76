import type { Counter, Gauge } from '@opentelemetry/api';
import { lazyInstruments } from './instruments.js';
import { metricNames } from './metricNames.js';
import type { GateSnapshot } from '../agents/callBudget.js';

/**
 * The global call budget's metrics (issue 26), per remote service: requests sent back to wait for
 * a call slot (by reason), pauses from the service's 429/503, and, sampled at each renewal-time
 * snapshot, the rate and concurrency this instance holds and the requests waiting here.
 */
interface Instruments {
  waits: Counter;
  pauses: Counter;
  rate: Gauge;
  concurrency: Gauge;
  waiting: Gauge;
  oldestWaitingAge: Gauge;
}

const instruments = lazyInstruments((meter): Instruments => ({
  waits: meter.createCounter(metricNames.callWaits, {
    description: 'Requests sent back to their queue to wait for a call slot',
  }),
  pauses: meter.createCounter(metricNames.callPauses, {
    description: "Pauses of a service's calls on its 429/503 with Retry-After",
  }),
  rate: meter.createGauge(metricNames.callRate, { description: 'Calls/s this instance may start' }),
  concurrency: meter.createGauge(metricNames.callConcurrency, {
    description: 'Calls this instance may have in flight',
  }),
  waiting: meter.createGauge(metricNames.callsWaiting, { description: 'Requests waiting for a call slot' }),
  oldestWaitingAge: meter.createGauge(metricNames.oldestCallWaitAge, {
    description: 'How long the oldest request waiting for a call slot has waited',
    unit: 's',
  }),
}));

export function recordCallWait(service: string, reason: string): void {
  instruments().waits.add(1, { service, reason });
}

export function recordCallPause(service: string): void {
  instruments().pauses.add(1, { service });
}

export function recordGate(s: GateSnapshot, now: number): void {
  const i = instruments();
  const attrs = { service: s.service };
  if (Number.isFinite(s.rate)) i.rate.record(s.rate, attrs);
  if (Number.isFinite(s.concurrency)) i.concurrency.record(s.concurrency, attrs);
  i.waiting.record(s.waiting, attrs);
  i.oldestWaitingAge.record(s.oldestWaitingSince > 0 ? (now - s.oldestWaitingSince) / 1000 : 0, attrs);
}
