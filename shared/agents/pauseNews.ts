/**
 * How fresh this process's news of a service's pause must be before it starts a call (issue 26:
 * a 429 at one instance pauses every instance within 1 s).
 *
 * A pause is recorded in the service's lease row by the instance that was refused, and the others
 * read the row when they renew. While a limit binds the lease is short and every host calls often,
 * so each learns within a second from the row or from its own first 429. When the limit does not
 * bind, a host that calls less than once a second holds a lease of up to a minute: it learned of
 * the pause at its renewal or by sending one call into it.
 *
 * So a call starts only on news at most `pauseNewsMaxAgeMs` old: the lease row read or written,
 * or the service's answer (not a refusal) to one of this process's calls. When there is none, the
 * process reads the row first, one read shared by every call that starts meanwhile. A host that
 * calls several times a second always has an answer from the last second and never reads; the
 * read falls only on a call after a quiet second, at most one a second per instance and service
 * (docs/remote-calls.md, "The pause reaches hosts that call rarely").
 *
 * The age limit is CALL_BUDGET_PAUSE_NEWS_SECONDS (this default; 0 never looks): freshness costs
 * about 3 e^(-R x A / I) reads per order at R orders/s over I instances.
 */
export const pauseNewsMaxAgeMs = 1_000;

/**
 * The longest a call waits for its look. A look not answered by then lets the call go (the grant
 * still bounds it): a table that hangs must not hold every rare call with it.
 */
export const pauseLookWaitMs = 1_000;

/** An answer that shows the service accepting calls: any status it gave, except a refusal. */
export function acceptedStatus(status: number | undefined): boolean {
  return status !== undefined && status < 500 && status !== 429;
}

export class PauseNews {
  private heardAt = Number.NEGATIVE_INFINITY;
  private looking: Promise<void> | undefined;

  /** @param maxAgeMs the oldest news a call may start on; 0: never look (news is always fresh). */
  constructor(private readonly maxAgeMs = pauseNewsMaxAgeMs) {}

  /** Something as of `at` (epoch ms) said whether the service is paused. */
  heard(at: number): void {
    this.heardAt = Math.max(this.heardAt, at);
  }

  /** Whether a call at `now` needs a fresh look first. */
  stale(now: number): boolean {
    return this.maxAgeMs > 0 && now - this.heardAt > this.maxAgeMs;
  }

  /**
   * Makes the news fresh for a call at `now`: `look()` reads the row and applies its pause (the
   * news counts from `now`, when the read was sent). Concurrent calls share one look; its failure
   * is the caller's to report, and leaves the news stale so the next call looks again. A look
   * not answered within `waitMs` resolves `false`: the call goes on, the look may still land, and
   * the next call sends its own (at most one new look per `waitMs`).
   */
  async fresh(now: number, look: () => Promise<void>, waitMs = pauseLookWaitMs): Promise<boolean> {
    if (!this.stale(now)) return true;
    if (!this.looking) {
      const started: Promise<void> = look()
        .then(() => this.heard(now))
        .finally(() => {
          // A look given up and answering late leaves a newer one in place.
          if (this.looking === started) this.looking = undefined;
        });
      this.looking = started;
    }
    const looking = this.looking;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), waitMs)));
    try {
      const answered = await Promise.race([looking.then(() => true as const), late]);
      // Given up: the next call sends a new look rather than wait on one that may never answer.
      if (!answered && this.looking === looking) this.looking = undefined;
      return answered;
    } finally {
      clearTimeout(timer);
    }
  }
}
