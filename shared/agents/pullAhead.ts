import type { PulledMessage } from '../messaging/bus.js';
import type { ServiceCallGate } from './callBudget.js';

/**
 * The next waiting request, read while this instance's slots are all busy (issue 26). Under a
 * concurrency limit the throughput is slots / cycle, and reading the next request after a slot
 * freed put a queue round trip into every cycle (staged bench, 20/s and 8 slots: 55-84 ms of a
 * 430-510 ms cycle). Read during the call instead, the freed slot starts it at once.
 *
 * At most one per instance (its peek-lock is held for about one call, far inside the queue's lock
 * duration); a loop that stops with one in hand gives it back to the queue, where the next free
 * slot reads it (a delivery of the waiting queue's ten).
 */
export class PullAhead {
  private pending: Promise<PulledMessage[]> | undefined;

  constructor(
    private readonly gate: ServiceCallGate,
    private readonly read: () => Promise<PulledMessage[]>,
  ) {}

  /** Reads the next waiting request now, unless one is read already here (any loop of the instance). */
  start(): void {
    if (this.pending || this.gate.readingAhead) return;
    this.gate.readingAhead = true;
    // A failed read is no request: the freed slot reads again itself.
    this.pending = this.read().catch(() => []);
  }

  /** What the read ahead got ([] for nothing), or undefined when none was started. */
  async take(): Promise<PulledMessage[] | undefined> {
    const p = this.pending;
    if (!p) return undefined;
    this.pending = undefined;
    try {
      return await p;
    } finally {
      this.gate.readingAhead = false;
    }
  }

  /** The loop stops: a request read ahead goes back to the queue for the next free slot. */
  async giveBack(): Promise<void> {
    const got = (await this.take()) ?? [];
    await Promise.all(got.map((m) => m.abandon().catch(() => undefined)));
  }
}
