/**
 * Each customer's share of the intake (issue 26, "who goes first"). Every queue an order passes
 * through (the Scheduler's, each Agent's) serves in arrival order, so a customer who submits 500
 * orders at once puts every other customer's next order behind all 500 in each of them. The share
 * rule at a limited service (callLine.ts) only acts at that service; upstream of it the others
 * still waited for the burst to pass (bench: their p95 time to terminal 6-8× their p95 alone).
 *
 * So an instance releases each customer's orders to the Scheduler at most `perSecond` a second,
 * after a burst of as many at once: the rest are accepted and recorded at once, and their claim
 * message is scheduled for their turn (Pending, scheduledFor). Another customer's order goes at
 * once, ahead of them. It holds nothing while an order waits (a scheduled message), costs no
 * extra operation, and shares no row: each instance paces the submissions it takes, so the
 * intake a customer can have grows with the instance count, as the capacity behind it does.
 *
 * The pacing is a generic cell rate (virtual scheduling): each customer's "theoretical arrival
 * time", one spacing later per order released, with a burst's worth of tolerance.
 */
export interface IntakeTurn {
  /** Epoch ms: when the order's claim message may reach the Scheduler (now when it is not held). */
  at: number;
  /** How long after now that is. */
  delayMs: number;
}

/** Customers whose turn lies in the past are forgotten once the book holds more than this. */
const pruneAbove = 1024;

export class CustomerIntake {
  private readonly next = new Map<string, number>();
  private readonly spacingMs: number;
  private readonly toleranceMs: number;

  constructor(readonly perSecond: number) {
    if (!(Number.isFinite(perSecond) && perSecond > 0)) {
      throw new RangeError(`perSecond must be a positive number, got ${perSecond}`);
    }
    this.spacingMs = 1000 / perSecond;
    this.toleranceMs = (Math.max(1, Math.floor(perSecond)) - 1) * this.spacingMs;
  }

  /** The turn an order of `customer` submitted at `now` would get; nothing is booked. */
  turnOf(customer: string, now: number): IntakeTurn {
    const { at } = this.cell(customer, now);
    return { at, delayMs: at - now };
  }

  /** Books the turn `turnOf` gave (call it only for an order accepted). */
  book(customer: string, now: number): IntakeTurn {
    const { tat, at } = this.cell(customer, now);
    this.next.set(customer, tat + this.spacingMs);
    if (this.next.size > pruneAbove) {
      for (const [c, due] of this.next) if (due <= now) this.next.delete(c);
    }
    return { at, delayMs: at - now };
  }

  /**
   * Returns a booked turn whose order was not recorded after all (it lost the race for its key,
   * or the write failed): the customer's later orders move up one spacing. Never below now: a
   * turn given back is no credit for later.
   */
  giveBack(customer: string): void {
    const tat = this.next.get(customer);
    if (tat !== undefined) this.next.set(customer, tat - this.spacingMs);
  }

  /** The customer's theoretical arrival time as of `now`, and the turn it gives. */
  private cell(customer: string, now: number): { tat: number; at: number } {
    const tat = Math.max(now, this.next.get(customer) ?? now);
    return { tat, at: Math.max(now, tat - this.toleranceMs) };
  }

  /** Customers in the book (those whose turn has passed go at the next prune). */
  get booked(): number {
    return this.next.size;
  }
}
