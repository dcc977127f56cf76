/** The knobs of the transition function, from app settings. All durations in seconds. */
export interface Policy {
  /** Complete-by for one step (and one compensation) from its dispatch. */
  readonly stepTimeoutSeconds: number;
  /** Complete-by for a Pending order: how long a Scheduler has to claim it. */
  readonly claimTimeoutSeconds: number;
  /** From this failure count on, retries wait extendedBackoffSeconds first. */
  readonly failureSoftThreshold: number;
  /** At this failure count the Supervisor gives up: Error, alert, compensation. */
  readonly failureHardThreshold: number;
  readonly extendedBackoffSeconds: number;
}

export class InvalidPolicy extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidPolicy';
  }
}

export function makePolicy(p: {
  stepTimeoutSeconds: number;
  failureSoftThreshold: number;
  failureHardThreshold: number;
  extendedBackoffSeconds: number;
  claimTimeoutSeconds?: number;
}): Policy {
  const policy: Policy = { ...p, claimTimeoutSeconds: p.claimTimeoutSeconds ?? p.stepTimeoutSeconds };
  for (const [k, v] of Object.entries(policy)) {
    if (!Number.isInteger(v) || v < 0) throw new InvalidPolicy(`${k} must be a non-negative integer`);
  }
  if (policy.stepTimeoutSeconds < 1 || policy.claimTimeoutSeconds < 1) {
    throw new InvalidPolicy('timeouts must be at least 1 second');
  }
  if (policy.failureSoftThreshold < 1 || policy.failureHardThreshold < policy.failureSoftThreshold) {
    throw new InvalidPolicy('need 1 <= failureSoftThreshold <= failureHardThreshold');
  }
  return Object.freeze(policy);
}
