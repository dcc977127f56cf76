import type { Counter, UpDownCounter } from '@opentelemetry/api';
import { waitingStep, type OrderState } from '../domain/index.js';
import { lazyInstruments } from './instruments.js';
import { metricNames } from './metricNames.js';

/**
 * Metrics of waiting steps (issue 25): steps waiting and approvals pending (up-down counters moved
 * by each transition that begins or ends a wait, summed across instances), callbacks received by
 * verdict and refused by reason (`forged`, `expired`, `bad-body`, ...).
 */
interface Instruments {
  waiting: UpDownCounter;
  approvalsPending: UpDownCounter;
  callbacks: Counter;
  refused: Counter;
}

const instruments = lazyInstruments((meter): Instruments => ({
  waiting: meter.createUpDownCounter(metricNames.stepsWaiting, {
    description: 'Steps waiting for a callback or an operator (nothing held)',
  }),
  approvalsPending: meter.createUpDownCounter(metricNames.approvalsPending, {
    description: 'Approval steps waiting for an operator',
  }),
  callbacks: meter.createCounter(metricNames.callbacksReceived, {
    description: 'Callbacks with a valid token, by verdict (applied, duplicate, moved-on)',
  }),
  refused: meter.createCounter(metricNames.callbacksRefused, {
    description: 'Callbacks refused, by reason (forged, expired, malformed, bad-body, too-large)',
  }),
}));

/** One applied transition: whether it began or ended a wait. */
export function recordWaiting(before: OrderState | null, after: OrderState): void {
  const was = before ? waitingStep(before) : undefined;
  const is = waitingStep(after);
  const same = was !== undefined && is !== undefined && was.name === is.name && was.attempt === is.attempt;
  if (same) return;
  const approval = (s: typeof was) => s !== undefined && s.reference == null && isApprovalLike(s);
  if (was) {
    instruments().waiting.add(-1, { step: was.name });
    if (approval(was)) instruments().approvalsPending.add(-1, { step: was.name });
  }
  if (is) {
    instruments().waiting.add(1, { step: is.name });
    if (approval(is)) instruments().approvalsPending.add(1, { step: is.name });
  }
}

// An approval's wait begins at its dispatch (startedAt = waitingSince); a callback's at the 202.
function isApprovalLike(s: { startedAt: Date | null; waitingSince?: Date | null }): boolean {
  return s.startedAt !== null && s.waitingSince != null && s.startedAt.getTime() === s.waitingSince.getTime();
}

export function recordCallback(verdict: 'applied' | 'duplicate' | 'moved-on', kind: string): void {
  instruments().callbacks.add(1, { verdict, kind });
}

export function recordCallbackRefused(reason: string): void {
  instruments().refused.add(1, { reason });
}
