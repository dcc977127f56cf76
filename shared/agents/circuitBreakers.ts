import { loadCockatiel, type Cockatiel } from './cockatiel.js';
import { InterruptedAttemptError, TransientRemoteError } from './remoteCallErrors.js';

/**
 * One circuit breaker per remote service (base URL) per process, shared by every call the Agent
 * makes, so a service that keeps failing is left alone until the breaker half-opens.
 */

export interface BreakerSettings {
  threshold: number;
  halfOpenAfterMs: number;
}

interface BreakerEntry {
  policy: Cockatiel.CircuitBreakerPolicy;
  /** When the open circuit lets a probe through (Date.now() clock, like cockatiel's). */
  halfOpensAt: number;
}

const breakers = new Map<string, BreakerEntry>();

export type CircuitStateName = 'closed' | 'open' | 'half-open' | 'isolated';

// Mirrors cockatiel's CircuitState enum (Closed, Open, HalfOpen, Isolated).
const stateNames: CircuitStateName[] = ['closed', 'open', 'half-open', 'isolated'];

export function normalizeBaseUrl(baseUrl: string): string {
  return new URL(baseUrl).href.replace(/\/+$/, '');
}

// Settings are part of the key so a test with tiny thresholds never shares a breaker with
// another configuration; in the app the settings are constant, so this is one breaker per URL.
function keyOf(baseUrl: string, settings: BreakerSettings): string {
  return `${normalizeBaseUrl(baseUrl)} ${settings.threshold} ${settings.halfOpenAfterMs}`;
}

export async function breakerFor(baseUrl: string, settings: BreakerSettings): Promise<BreakerEntry> {
  const { circuitBreaker, handleWhen, ConsecutiveBreaker } = await loadCockatiel();
  const key = keyOf(baseUrl, settings);
  let entry = breakers.get(key);
  if (!entry) {
    // Only transient failures say the service is unwell; a permanent 4xx is a healthy answer.
    // An attempt cut off by our own complete-by says nothing about the service's health: counting
    // it would let a few hung calls open the circuit and starve the Supervisor's retries.
    const serviceFailure = handleWhen(
      (e) => e instanceof TransientRemoteError && !(e instanceof InterruptedAttemptError),
    );
    const policy = circuitBreaker(serviceFailure, {
      breaker: new ConsecutiveBreaker(settings.threshold),
      halfOpenAfter: settings.halfOpenAfterMs,
    });
    const created: BreakerEntry = { policy, halfOpensAt: 0 };
    policy.onBreak(() => {
      created.halfOpensAt = Date.now() + settings.halfOpenAfterMs;
    });
    breakers.set(key, created);
    entry = created;
  }
  return entry;
}

/** The state of the breakers for a base URL (several only when tests use several settings). */
export function circuitStatesFor(baseUrl: string): CircuitStateName[] {
  const prefix = `${normalizeBaseUrl(baseUrl)} `;
  return [...breakers.entries()]
    .filter(([key]) => key.startsWith(prefix))
    .map(([, entry]) => stateNames[entry.policy.state]);
}

/** Forgets every breaker; for tests. */
export function resetCircuitBreakers(): void {
  breakers.clear();
}
