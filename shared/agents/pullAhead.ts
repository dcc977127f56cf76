import type { PulledMessage } from '../messaging/bus.js';
import { traceCall } from './callTrace.js';

/** A request read ahead and not started within this goes back (its lock lasts a minute). */
export const maxHoldMs = 20_000;

/**
 * The next waiting request, read while an instance's slots are all busy (issue 26). Under a
 * concurrency limit the throughput is slots / cycle, and reading the next request after a slot
 * freed put a queue round trip into every cycle (staged bench, 20/s and 8 slots: 55-84 ms of a
 * 430-510 ms cycle). Read during the calls instead, the slot that frees starts it at once.
 *
 * One per instance and service (on its gate), taken by whichever pull loop claims the freed slot;
 * its peek-lock is held for about one call, far inside the queue's lock duration. When the last
 * pull loop of the instance stops with one in hand, it goes back to the queue, where the next free
 * slot reads it (a delivery of the waiting queue's ten).
 */
export class PullAhead {
  private pending: Promise<{ got: PulledMessage[]; at: number }> | undefined;

  constructor(
    private readonly read: () => Promise<PulledMessage[]>,
    private readonly instance: string,
    private readonly holdMs = maxHoldMs,
  ) {}

  /** Reads the next waiting request now, unless one is read (or being read) already. */
  start(): void {
    if (this.pending) return;
    // A failed read is no request: the freed slot reads again itself.
    this.pending = this.read()
      .catch(() => [])
      .then((got) => ({ got, at: Date.now() }));
  }

  /**
   * What the read ahead got ([] for nothing), or undefined when none was started. One held past
   * `holdMs` goes back instead: its lock may be near its end, and a request whose lock lapsed
   * can be read and called by another instance too.
   */
  async take(): Promise<PulledMessage[] | undefined> {
    const p = this.pending;
    this.pending = undefined;
    if (!p) return undefined;
    const { got, at } = await p;
    if (Date.now() - at <= this.holdMs) return got;
    await this.abandon(got);
    return [];
  }

  /** The instance's last pull loop stopped: a request read ahead goes back to the queue. */
  async giveBack(): Promise<void> {
    await this.abandon((await this.take()) ?? []);
  }

  private async abandon(got: PulledMessage[]): Promise<void> {
    if (got.length === 0) return;
    traceCall({ ev: 'give-back', inst: this.instance, t: Date.now(), n: got.length });
    await Promise.all(got.map((m) => m.abandon().catch(() => undefined)));
  }
}
