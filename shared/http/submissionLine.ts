/**
 * Each customer's submissions in progress at this instance (CUSTOMER_SUBMISSIONS_AT_ONCE). A
 * submission's work (reading the record of its key, the door, the write, the claim's send) runs
 * on the instance's one event loop and its storage connections, shared by every request it has
 * taken. A customer who posts 500 orders at once would put every other customer's submission
 * behind all 500 (bench: the others' 202 came 6-13 s after their POST). So each customer has at
 * most `atOnce` submissions in progress here; the rest wait in the customer's own line, in
 * arrival order, and another customer's submission goes at once.
 *
 * Nothing is recorded while a submission waits: it is a request not yet answered, not an order.
 * The line is bounded: past `maxWaiting` waiting, the next is refused (the caller answers 429 with
 * Retry-After), so a burst cannot keep unbounded requests open at an instance.
 */
/** The most submissions of one customer that wait at one instance (the app's line). */
export const submissionLineWaiting = 1000;

export class SubmissionLine {
  private readonly lines = new Map<string, { active: number; waiting: Array<() => void> }>();

  constructor(
    readonly atOnce: number,
    readonly maxWaiting: number,
  ) {
    if (!(Number.isInteger(atOnce) && atOnce > 0)) {
      throw new RangeError(`atOnce must be a positive integer, got ${atOnce}`);
    }
    if (!(Number.isInteger(maxWaiting) && maxWaiting >= 0)) {
      throw new RangeError(`maxWaiting must be a non-negative integer, got ${maxWaiting}`);
    }
  }

  /**
   * The customer's turn to go on: resolves with the function that ends it (call it once the
   * submission is answered), at once when the customer has fewer than `atOnce` in progress.
   * Undefined when its line is full.
   */
  enter(customer: string): Promise<() => void> | undefined {
    let line = this.lines.get(customer);
    if (!line) {
      line = { active: 0, waiting: [] };
      this.lines.set(customer, line);
    }
    let done = false;
    const release = () => {
      if (done) return;
      done = true;
      this.leave(customer);
    };
    if (line.active < this.atOnce) {
      line.active += 1;
      return Promise.resolve(release);
    }
    if (line.waiting.length >= this.maxWaiting) return undefined;
    const waiting = line.waiting;
    return new Promise((resolve) => waiting.push(() => resolve(release)));
  }

  /** Submissions of `customer` waiting for their turn here. */
  waiting(customer: string): number {
    return this.lines.get(customer)?.waiting.length ?? 0;
  }

  /** Customers with a submission in progress or waiting. */
  get customers(): number {
    return this.lines.size;
  }

  private leave(customer: string): void {
    const line = this.lines.get(customer);
    if (!line) return;
    // The slot passes straight to the longest waiting: nobody arriving now goes ahead of it.
    const next = line.waiting.shift();
    if (next) return next();
    line.active -= 1;
    if (line.active === 0) this.lines.delete(customer);
  }
}
