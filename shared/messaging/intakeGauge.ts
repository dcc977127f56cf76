import type { ServiceBusClient } from '@azure/service-bus';
import { ServiceBusQueueBacklog, type QueueBacklog } from './backlog.js';
import { queues } from './entities.js';

/**
 * How far behind the Scheduler's intake is, measured for the submission door. A peek per
 * submission would add a billed Service Bus operation to every order and slow the door exactly
 * when the broker is busiest, so one measurement serves every submission of this instance for
 * `sampleMs`, and concurrent submissions share one peek in flight.
 */
export class IntakeGauge {
  private last: { at: number; value: IntakeReading } | undefined;
  private pending: Promise<IntakeReading> | undefined;

  constructor(
    private readonly backlog: Pick<QueueBacklog, 'oldestWaiting'>,
    private readonly sampleMs = 5_000,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** The oldest waiting message's enqueue time; `unknown` (with why) when the peek failed. */
  async read(): Promise<IntakeReading> {
    const now = this.nowMs();
    if (this.last && now - this.last.at < this.sampleMs) return this.last.value;
    this.pending ??= this.measure().finally(() => (this.pending = undefined));
    return this.pending;
  }

  private async measure(): Promise<IntakeReading> {
    let value: IntakeReading;
    try {
      const head = await this.backlog.oldestWaiting();
      value = { known: true, oldestWaitingSince: head?.enqueuedAt };
    } catch (e) {
      value = { known: false, error: (e as Error).message };
    }
    this.last = { at: this.nowMs(), value };
    return value;
  }
}

export type IntakeReading =
  { known: true; oldestWaitingSince: Date | undefined } | { known: false; error: string };

/**
 * The door's gauge of the scheduler queue, as the app builds it: one peeked message per sample
 * when an active message heads the queue; past a scheduled head, one page is enough to find the
 * head of a backlog worth refusing for.
 */
export function schedulerIntakeGauge(client: ServiceBusClient, sampleMs?: number): IntakeGauge {
  return new IntakeGauge(new ServiceBusQueueBacklog(client, queues.scheduler, 1), sampleMs);
}
