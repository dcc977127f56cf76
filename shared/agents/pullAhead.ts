import type { PulledMessage } from '../messaging/bus.js';
import { traceCall } from './callTrace.js';

/** A request read ahead and not started within this goes back (its lock lasts a minute). */
export const maxHoldMs = 20_000;

/** The most requests read ahead at once: a rate window frees a few starts together, not more. */
export const maxReadAhead = 4;

/**
 * The next waiting requests, read while an instance's slots are busy or its rate window is
 * closed (issue 26). Under a concurrency limit the throughput is slots / cycle, and reading the
 * next request after a slot freed put a queue round trip into every cycle (staged bench, 20/s and
 * 8 slots: 55-84 ms of a 430-510 ms cycle). Under a rate limit every start the window admits late
 * is lost for good (the next start of its window is a window after it), and the window frees
 * several starts within a few ms: one request read ahead served the first of them, and each of
 * the others read its own (40-60 ms each). Read ahead, the slot that frees (or the window that
 * opens) starts at once.
 *
 * One per instance and service (on its gate), taken by whichever pull loop claims the slot, oldest
 * first; each peek-lock is held for about one call, far inside the queue's lock duration. When the
 * last pull loop of the instance stops, what it holds goes back to the queue, where the next free
 * slot reads it.
 */
export class PullAhead {
  private held: Array<{ m: PulledMessage; at: number }> = [];
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly read: () => Promise<PulledMessage[]>,
    private readonly instance: string,
    private readonly holdMs = maxHoldMs,
  ) {}

  /**
   * Reads ahead until `want` requests are in hand or being read. Each is a read of its own (a read
   * of several waits up to a second after the first for the rest when fewer wait).
   */
  start(want = 1): void {
    for (let n = this.held.length + this.pending.size; n < Math.min(want, maxReadAhead); n++) {
      // A failed read is no request: the slot reads again itself.
      const p: Promise<void> = this.read()
        .catch(() => [])
        .then((got) => {
          const at = Date.now();
          for (const m of got) this.held.push({ m, at });
        })
        .finally(() => this.pending.delete(p));
      this.pending.add(p);
    }
  }

  /**
   * The oldest request read ahead ([m]), [] when the reads ahead found none, or undefined when none
   * was read. One held past `holdMs` goes back instead: its lock may be near its end, and a
   * request whose lock lapsed can be read and called by another instance too.
   */
  async take(): Promise<PulledMessage[] | undefined> {
    const reading = this.pending.size > 0;
    while (this.held.length === 0 && this.pending.size > 0) await Promise.race(this.pending);
    const stale = this.held.filter((h) => Date.now() - h.at > this.holdMs);
    this.held = this.held.filter((h) => !stale.includes(h));
    await this.abandon(stale.map((h) => h.m));
    const first = this.held.shift();
    if (first) return [first.m];
    return reading || stale.length > 0 ? [] : undefined;
  }

  /** The instance's last pull loop stopped: the requests read ahead go back to the queue (how many). */
  async giveBack(): Promise<number> {
    await Promise.all(this.pending);
    const all = this.held.map((h) => h.m);
    this.held = [];
    await this.abandon(all);
    return all.length;
  }

  private async abandon(got: PulledMessage[]): Promise<void> {
    if (got.length === 0) return;
    traceCall({ ev: 'give-back', inst: this.instance, t: Date.now(), n: got.length });
    await Promise.all(got.map((m) => m.abandon().catch(() => undefined)));
  }
}
