import type { ServiceBusClient, ServiceBusReceivedMessage, ServiceBusReceiver } from '@azure/service-bus';
import Long from 'long';

/**
 * How far behind a queue's consumers are: the enqueue time of the oldest message still waiting
 * (or being handled), scheduled ones aside. The Supervisor asks it of the scheduler queue: every
 * message enqueued before that instant has been taken in, so an Agent's reply sent before an
 * order's complete-by has surely been applied only if that complete-by lies before it.
 */
export interface QueueBacklog {
  /** The oldest waiting message's enqueue time and an id for it; undefined when nothing waits. */
  oldestWaiting(): Promise<{ enqueuedAt: Date; id: string } | undefined>;
  /** The head, and the ids of every message waiting or being handled, as far as the peek went. */
  snapshot(): Promise<QueueSnapshot>;
}

export interface QueueSnapshot {
  oldest: { enqueuedAt: Date; id: string } | undefined;
  messageIds: Set<string>;
  /** False when the peek stopped at its page limit before the queue's end. */
  complete: boolean;
}

/** Peeks the head of a queue (peek needs the Listen right the queue's trigger already has). */
export class ServiceBusQueueBacklog implements QueueBacklog {
  constructor(
    private readonly client: ServiceBusClient,
    private readonly queue: string,
    /** Pages of 100 peeked at most while looking past scheduled messages. */
    private readonly maxPages = 5,
  ) {}

  /**
   * Peeks from the head, page by page. The SDK keeps a peek cursor per entity (shared by every
   * receiver of the client), so each page names its first sequence number explicitly. A first
   * page of one (`headFirst`) does not count against `maxPages`.
   */
  private async *pages(receiver: ServiceBusReceiver, headFirst = false) {
    let from = Long.ZERO;
    for (let page = headFirst ? -1 : 0; page < this.maxPages; page++) {
      const size = page < 0 ? 1 : 100;
      const batch = await receiver.peekMessages(size, { fromSequenceNumber: from });
      if (batch.length === 0) return;
      yield batch;
      const last = batch[batch.length - 1].sequenceNumber;
      if (batch.length < size || last === undefined) return;
      from = Long.fromValue(last).add(1);
    }
  }

  /**
   * One peeked message when an active one heads the queue, the usual case: messages never
   * scheduled take sequence numbers in enqueue order, so the first active one is the oldest
   * (Service Bus goes on reporting a once-scheduled message as scheduled, due or not). Only past
   * a head that is not active does it read pages. Why: on Service Bus Standard each peeked
   * message is a credit, and the submission door samples every few seconds on every instance.
   */
  async oldestWaiting(): Promise<{ enqueuedAt: Date; id: string } | undefined> {
    const receiver = this.client.createReceiver(this.queue);
    try {
      for await (const batch of this.pages(receiver, true)) {
        const waiting = batch.filter((m) => m.state === 'active' && m.enqueuedTimeUtc !== undefined);
        if (waiting.length === 0) continue;
        return headOf(waiting);
      }
      return undefined;
    } finally {
      await receiver.close().catch(() => undefined);
    }
  }

  async snapshot(): Promise<QueueSnapshot> {
    const receiver = this.client.createReceiver(this.queue);
    const snapshot: QueueSnapshot = { oldest: undefined, messageIds: new Set(), complete: false };
    try {
      let pages = 0;
      let last = 100;
      for await (const batch of this.pages(receiver)) {
        pages += 1;
        last = batch.length;
        const waiting = batch.filter((m) => m.state === 'active' && m.enqueuedTimeUtc !== undefined);
        if (waiting.length > 0 && snapshot.oldest === undefined) snapshot.oldest = headOf(waiting);
        for (const m of waiting) if (m.messageId !== undefined) snapshot.messageIds.add(String(m.messageId));
      }
      snapshot.complete = pages < this.maxPages || last < 100;
      return snapshot;
    } finally {
      await receiver.close().catch(() => undefined);
    }
  }
}

function headOf(waiting: ServiceBusReceivedMessage[]): { enqueuedAt: Date; id: string } {
  const oldest = waiting.reduce((a, b) => (b.enqueuedTimeUtc! < a.enqueuedTimeUtc! ? b : a));
  return { enqueuedAt: oldest.enqueuedTimeUtc!, id: String(oldest.sequenceNumber ?? oldest.messageId) };
}
