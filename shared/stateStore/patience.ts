import { loadCockatiel } from '../agents/cockatiel.js';
import { httpStatusOf } from './errors.js';

/**
 * Patience for a state-index write the order is already committed to (its previous state's group
 * going, after the transaction). The table client gives up after its own three retries (about
 * 7 s); under a throttled partition most such removals were then dropped (the throttled
 * simulation: 0.1-0.2 of the one removal per order got through), leaving the group counted in the
 * old state until the hourly repair pays for it. Waiting is not failing: the write is tried again
 * after a back-off while the service refuses it for load. What is still refused after that stays
 * best effort (readers and the repair pass remove it, stateIndex.ts).
 */
export interface Patience {
  /** Further tries after the first one is refused. */
  retries: number;
  initialDelayMs: number;
  maxDelayMs: number;
}

export const removalPatience: Patience = Object.freeze({
  retries: 4,
  initialDelayMs: 1_000,
  maxDelayMs: 8_000,
});

/** 503 ServerBusy, 500 OperationTimedOut, 408: the service refused for load; trying later is the remedy. */
export function refusedForLoad(e: unknown): boolean {
  const status = httpStatusOf(e);
  return status === 503 || status === 500 || status === 408;
}

export async function whileRefusedForLoad<T>(
  write: () => Promise<T>,
  patience: Patience = removalPatience,
): Promise<T> {
  const { ExponentialBackoff, handleWhen, retry } = await loadCockatiel();
  const policy = retry(handleWhen(refusedForLoad), {
    maxAttempts: patience.retries,
    backoff: new ExponentialBackoff({ initialDelay: patience.initialDelayMs, maxDelay: patience.maxDelayMs }),
  });
  return policy.execute(() => write());
}
