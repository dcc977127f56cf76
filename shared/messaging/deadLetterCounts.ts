import type { ServiceBusClient, ServiceBusReceiver } from '@azure/service-bus';
import Long from 'long';
import { queues, topics } from './entities.js';

/**
 * Dead letters per entity, by peeking each dead-letter subqueue (no lock, nothing settled). The
 * management API would give exact counts in one call but needs the Manage right, which the app's
 * identity (Data Sender/Receiver) does not have; a peek needs only Listen. A peek stops after
 * `maxPages` pages of 100: a count at that cap means "at least". Alerting needs "more than zero".
 */
export interface DeadLetterCount {
  /** A queue name, or `topic/subscriptions/name`. */
  entity: string;
  count: number;
}

/** Every entity whose dead letters the app owns (Config.json and servicebus-entities.bicep). */
export const deadLetterEntities: ReadonlyArray<{ queue: string } | { topic: string; subscription: string }> =
  [...Object.values(queues).map((queue) => ({ queue })), { topic: topics.orderStatus, subscription: 'all' }];

async function countPeeked(receiver: ServiceBusReceiver, maxPages: number): Promise<number> {
  let count = 0;
  let from = Long.ZERO;
  for (let page = 0; page < maxPages; page++) {
    const batch = await receiver.peekMessages(100, { fromSequenceNumber: from });
    count += batch.length;
    const last = batch[batch.length - 1]?.sequenceNumber;
    if (batch.length < 100 || last === undefined) break;
    from = Long.fromValue(last).add(1);
  }
  return count;
}

export async function countDeadLetters(client: ServiceBusClient, maxPages = 10): Promise<DeadLetterCount[]> {
  return Promise.all(
    deadLetterEntities.map(async (e) => {
      const options = { subQueueType: 'deadLetter' as const };
      const receiver =
        'queue' in e
          ? client.createReceiver(e.queue, options)
          : client.createReceiver(e.topic, e.subscription, options);
      try {
        const entity = 'queue' in e ? e.queue : `${e.topic}/subscriptions/${e.subscription}`;
        return { entity, count: await countPeeked(receiver, maxPages) };
      } finally {
        await receiver.close().catch(() => undefined);
      }
    }),
  );
}
