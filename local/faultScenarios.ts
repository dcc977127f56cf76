import type { ProcessState } from '../shared/domain/index.js';
import { defaultRemoteCallPolicy } from '../shared/agents/remoteServiceClient.js';
import { faultSku } from './remoteServices/index.js';

/**
 * Kinds of orders the demo and the end-to-end tests submit, each with the fault SKUs that make
 * the demo services misbehave and the terminal state the pattern predicts for them. The
 * prediction is the specification: a mismatch is a bug.
 */

export interface TimingSettings {
  stepTimeoutSeconds: number;
  failureSoftThreshold: number;
  failureHardThreshold: number;
  extendedBackoffSeconds: number;
  /** Seconds between Supervisor sweeps. */
  supervisorPeriodSeconds: number;
}

export interface FaultScenario {
  kind: string;
  /** What happens, for people. */
  description: string;
  skus: string[];
  expect: ProcessState;
  /** Whether the Supervisor must have timed the order out at least once (failure count > 0). */
  expectTimeouts: boolean;
}

/** Seconds between sweeps for a six-field NCRONTAB like `*\/5 * * * * *`; 60 when unknown. */
export function supervisorPeriodSeconds(schedule: string): number {
  const fields = schedule.trim().split(/\s+/);
  if (fields.length !== 6) return 60;
  const [sec, min] = fields;
  const step = /^(?:\*|0)\/(\d+)$/.exec(sec);
  if (sec === '*' && min === '*') return 1;
  if (step && min === '*') return Number(step[1]);
  return 60;
}

export function timingFromSettings(settings: Record<string, string | undefined>): TimingSettings {
  const num = (name: string, fallback: number) => {
    const n = Number(settings[name]);
    return Number.isFinite(n) && settings[name] !== undefined && settings[name] !== '' ? n : fallback;
  };
  return {
    stepTimeoutSeconds: num('STEP_TIMEOUT_SECONDS', 60),
    failureSoftThreshold: num('FAILURE_SOFT_THRESHOLD', 3),
    failureHardThreshold: num('FAILURE_HARD_THRESHOLD', 5),
    extendedBackoffSeconds: num('EXTENDED_BACKOFF_SECONDS', 120),
    supervisorPeriodSeconds: supervisorPeriodSeconds(settings.SUPERVISOR_SCHEDULE ?? '*/30 * * * * *'),
  };
}

/**
 * Attempts that fit in one step's complete-by: the Agent cuts each attempt at attemptTimeoutMs
 * and retries, so a hang must outlast all of them to make the step pass its complete-by.
 */
function hangsToPassCompleteBy(t: TimingSettings): number {
  const perDispatch =
    Math.floor((t.stepTimeoutSeconds * 1000) / defaultRemoteCallPolicy.attemptTimeoutMs) + 1;
  return Math.min(perDispatch, defaultRemoteCallPolicy.maxAttempts);
}

/** Roughly how long an order that always hangs takes to reach Error (GaveUp), in seconds. */
export function secondsToExhaustRetries(t: TimingSettings): number {
  let total = 0;
  for (let failure = 1; failure <= t.failureHardThreshold; failure++) {
    total += t.stepTimeoutSeconds + t.supervisorPeriodSeconds;
    if (failure >= t.failureSoftThreshold && failure < t.failureHardThreshold)
      total += t.extendedBackoffSeconds;
  }
  return total;
}

/**
 * The scenarios for these settings. `includeExhaustion` adds an order that times out until the
 * Supervisor gives up, which takes secondsToExhaustRetries(); leave it out when that is too long.
 */
export function faultScenarios(t: TimingSettings, includeExhaustion: boolean): FaultScenario[] {
  const hangs = hangsToPassCompleteBy(t);
  const list: FaultScenario[] = [
    { kind: 'clean', description: 'no fault', skus: [], expect: 'Processed', expectTimeouts: false },
    {
      kind: 'transient',
      description: 'inventory answers 503 twice; the Agent retries within the step',
      skus: [faultSku('inventory', 'transient', 2)],
      expect: 'Processed',
      expectTimeouts: false,
    },
    {
      kind: 'throttle',
      description: 'payment answers 429 Retry-After 1 s once',
      skus: [faultSku('payment', 'throttle', 1)],
      expect: 'Processed',
      expectTimeouts: false,
    },
    {
      kind: 'lost-reply',
      description: 'shipping performs the effect but the reply is lost; the retry gets the recorded one',
      skus: [faultSku('shipping', 'lost-reply', 1)],
      expect: 'Processed',
      expectTimeouts: false,
    },
    {
      kind: 'hang',
      description: `payment hangs past complete-by (${hangs} attempt(s)); the Supervisor retries`,
      skus: [faultSku('payment', 'hang', hangs)],
      expect: 'Processed',
      expectTimeouts: true,
    },
    {
      kind: 'permanent@2',
      description: 'payment refuses (422): inventory is released',
      skus: [faultSku('payment', 'permanent')],
      expect: 'Compensated',
      expectTimeouts: false,
    },
    {
      kind: 'permanent@3',
      description: 'shipping refuses (422): payment refunded, inventory released',
      skus: [faultSku('shipping', 'permanent')],
      expect: 'Compensated',
      expectTimeouts: false,
    },
    {
      kind: 'compensation-transient',
      description: 'shipping refuses; the refund fails twice with 503, then works',
      skus: [faultSku('shipping', 'permanent'), faultSku('payment', 'compensation-transient', 2)],
      expect: 'Compensated',
      expectTimeouts: false,
    },
    {
      kind: 'compensation-fails',
      description: 'shipping refuses and the refund is refused: Error for an operator',
      skus: [faultSku('shipping', 'permanent'), faultSku('payment', 'compensation-fails')],
      expect: 'Error',
      expectTimeouts: false,
    },
  ];
  if (includeExhaustion) {
    list.push({
      kind: 'exhausted',
      description: `inventory never answers: ${t.failureHardThreshold} timeouts, then Error (GaveUp)`,
      skus: [faultSku('inventory', 'hang', 1000)],
      expect: 'Error',
      expectTimeouts: true,
    });
  }
  return list;
}

/**
 * A batch of `count` orders: every scenario at least once (as far as count allows), then more of
 * each in turn, with clean orders making up about a quarter.
 */
export function batchOf(scenarios: readonly FaultScenario[], count: number): FaultScenario[] {
  const batch: FaultScenario[] = [];
  const clean = scenarios.find((s) => s.kind === 'clean');
  let i = 0;
  while (batch.length < count) {
    const next = scenarios[i % scenarios.length];
    batch.push(next);
    if (clean && next !== clean && i % 3 === 2 && batch.length < count) batch.push(clean);
    i++;
  }
  return batch;
}
