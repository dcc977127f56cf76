import type { ServiceBusClient } from '@azure/service-bus';
import Long from 'long';
import type { QueueBacklog } from './backlog.js';

/**
 * The oldest waiting message of a queue for one peeked message when an active one heads it, the
 * usual case. Messages that were never scheduled take sequence numbers in enqueue order, so the
 * first active one is the oldest; Service Bus goes on reporting a once-scheduled message as
 * scheduled (due or not), and page scans skip those as well. Only when the head is not active
 * (scheduled, deferred) does `behindTheHead` look further, page by page.
 *
 * Why: on Service Bus Standard each peeked message is a credit, and the submission door samples
 * every few seconds on every instance; a page of 100 per sample spent a namespace's credits.
 */
export class ServiceBusQueueHead implements Pick<QueueBacklog, 'oldestWaiting'> {
  constructor(
    private readonly client: ServiceBusClient,
    private readonly queue: string,
    private readonly behindTheHead: Pick<QueueBacklog, 'oldestWaiting'>,
  ) {}

  async oldestWaiting(): Promise<{ enqueuedAt: Date; id: string } | undefined> {
    const receiver = this.client.createReceiver(this.queue);
    let head;
    try {
      // From sequence number 0 explicitly: the SDK's peek cursor is shared by the client's receivers.
      [head] = await receiver.peekMessages(1, { fromSequenceNumber: Long.ZERO });
    } finally {
      await receiver.close().catch(() => undefined);
    }
    if (head === undefined) return undefined;
    if (head.state === 'active' && head.enqueuedTimeUtc !== undefined) {
      return { enqueuedAt: head.enqueuedTimeUtc, id: String(head.sequenceNumber ?? head.messageId) };
    }
    return this.behindTheHead.oldestWaiting();
  }
}
