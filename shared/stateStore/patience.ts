import { loadCockatiel } from '../agents/cockatiel.js';
import { httpStatusOf } from './errors.js';

/**
 * Patience for a state-index write the order is already committed to (its previous state's group
 * going, after the transaction). The table client gives up after its own three retries (about
 * 7 s); under a throttled partition most such removals were then dropped (the throttled
 * simulation: 0.1-0.2 of the one removal per order got through), leaving the group counted in the
 * old state until the hourly repair pays for it. So a removal the service refused for load is
 * tried again, in the background: awaiting it held the Scheduler's invocation past the claim's
 * deadline (30 s in the simulation), and the Supervisor then retried orders that were only
 * waiting. What is still refused after that stays best effort (readers and the repair pass remove
 * it, stateIndex.ts); a process that stops meanwhile leaves the same.
 */
export interface Patience {
  /** Tries after the refused one. */
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

/** When `e` is a refusal for load, tries `write` again later, not awaited; anything else is ignored. */
export function retryLaterIfRefused(
  e: unknown,
  write: () => Promise<unknown>,
  patience: Patience = removalPatience,
): void {
  if (!refusedForLoad(e)) return;
  const later = async () => {
    const { ExponentialBackoff, handleWhen, retry } = await loadCockatiel();
    const policy = retry(handleWhen(refusedForLoad), {
      maxAttempts: patience.retries - 1,
      backoff: new ExponentialBackoff({
        initialDelay: patience.initialDelayMs,
        maxDelay: patience.maxDelayMs,
      }),
    });
    await policy.execute(() => write());
  };
  setTimeout(() => void later().catch(() => undefined), patience.initialDelayMs);
}
