/**
 * The door: whether a new order is accepted now. The Scheduler's queue is the system's intake;
 * when its oldest waiting message has waited longer than the limit, the Schedulers are not keeping
 * up, and an order accepted now would only wait behind the others. Refusing it before anything
 * is written (503 with Retry-After) hands the wait back to the client, who can retry or go
 * elsewhere, instead of growing a backlog the system then has to drain.
 *
 * A backlog never fails an accepted order (claimTimedOut spends no failure budget): this rule is
 * about not promising what cannot be kept soon, not about protecting orders already taken.
 */
export type Admission =
  { open: true } | { open: false; backlogSeconds: number; limitSeconds: number; retryAfterSeconds: number };

/** Retry-After never asks a client to wait longer than this, so a recovered system is found soon. */
export const maxRetryAfterSeconds = 60;
/** Nor shorter: the measurement behind the refusal is itself a few seconds old. */
export const minRetryAfterSeconds = 5;

/**
 * @param oldestWaitingSince enqueue time of the oldest message waiting in the scheduler queue,
 *   undefined when nothing waits or the backlog cannot be measured (the door then stays open:
 *   a blind door that refused would turn a monitoring fault into an outage)
 * @param limitSeconds the longest wait accepted; 0 keeps the door always open
 */
export function admission(oldestWaitingSince: Date | undefined, now: Date, limitSeconds: number): Admission {
  if (limitSeconds <= 0 || oldestWaitingSince === undefined) return { open: true };
  const backlogSeconds = Math.max(0, (now.getTime() - oldestWaitingSince.getTime()) / 1000);
  if (backlogSeconds <= limitSeconds) return { open: true };
  // The backlog has to shrink by its excess before the door opens again; ask for about that.
  const excess = Math.ceil(backlogSeconds - limitSeconds);
  const retryAfterSeconds = Math.min(maxRetryAfterSeconds, Math.max(minRetryAfterSeconds, excess));
  return { open: false, backlogSeconds: Math.round(backlogSeconds), limitSeconds, retryAfterSeconds };
}
