/**
 * Token buckets, one per key (a table partition, a storage account, a namespace), for the
 * throttled simulation: each refills at its rate up to one second's worth. A request is let
 * through while its bucket is above zero and then pays its whole cost, so a large batch still
 * passes and the debt it leaves holds the next ones back: over any long window no key carries
 * more than its rate (plus one second's burst). Costs learnt only later (entities a query
 * returned, messages delivered) are paid with `debit`. Pure apart from the injected clock.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, { level: number; at: number }>();

  constructor(
    /** Units per second each key may spend. */
    readonly ratePerSecond: number,
    private readonly now: () => number = () => performance.now(),
    /** Seconds of rate a quiet key may save up. */
    private readonly burstSeconds = 1,
  ) {
    if (!(ratePerSecond > 0)) throw new RangeError(`a rate must be positive, got ${ratePerSecond}`);
  }

  private bucket(key: string): { level: number; at: number } {
    const t = this.now();
    const capacity = this.ratePerSecond * this.burstSeconds;
    const b = this.buckets.get(key) ?? { level: capacity, at: t };
    b.level = Math.min(capacity, b.level + ((t - b.at) / 1000) * this.ratePerSecond);
    b.at = t;
    this.buckets.set(key, b);
    return b;
  }

  /** Whether `key` may serve a request now; if so its cost is paid. */
  tryTake(key: string, cost = 1): boolean {
    const b = this.bucket(key);
    if (b.level <= 0) return false;
    b.level -= cost;
    return true;
  }

  /** Whether `key` would serve a request now, without paying anything. */
  open(key: string): boolean {
    return this.bucket(key).level > 0;
  }

  /** Pays a cost learnt after the fact; the level may go below zero (a debt). */
  debit(key: string, cost: number): void {
    if (cost > 0) this.bucket(key).level -= cost;
  }
}
