import type {
  ServiceBusClient,
  ServiceBusMessage,
  ServiceBusReceivedMessage,
  ServiceBusReceiver,
  ServiceBusSender,
} from '@azure/service-bus';
import Long from 'long';
import {
  deadLetterSources,
  redriveMessageId,
  redriveTargetOf,
  type DeadLetterSource,
} from '../domain/deadLetters.js';
import { orderStatusSubscriptions, queues, topics, waitingQueueOf, waitingQueues } from './entities.js';
import { poisonProperties } from './quarantine.js';

/**
 * The dead-letter queues of every queue and of the order-status topic's subscriptions, read and
 * settled through the Service Bus SDK (the same calls against the emulator and Azure; they need
 * the Listen right on each entity and Send on each redrive target, see infra/app/rbac.bicep).
 */

/** Every queue of the app, the Agents' waiting queues included. */
const appQueues: readonly string[] = [...Object.values(queues), ...waitingQueues];

/** Every dead-letter source the operator sees, derived from the entity names the app declares. */
export const deadLetterSourceList: readonly DeadLetterSource[] = deadLetterSources(appQueues, {
  [topics.orderStatus]: orderStatusSubscriptions,
});

/**
 * A waiting queue's Agent queue. A redrive sends a waiting request to its Agent queue, whose
 * trigger takes it at once: back in the waiting queue it would wait for a freed slot to pull it.
 */
const agentQueueOfWaiting = new Map(
  Object.values(queues)
    .filter((q) => waitingQueues.includes(waitingQueueOf(q)))
    .map((q): [string, string] => [waitingQueueOf(q), q]),
);

export function findDeadLetterSource(name: string): DeadLetterSource | undefined {
  return deadLetterSourceList.find((s) => s.name === name);
}

/** A dead letter as the SDK gave it (peeked or received). */
export type DeadLetter = ServiceBusReceivedMessage;

export interface DeadLetterCount {
  count: number;
  /** True when counting stopped at the peek limit: there are at least `count`. */
  capped: boolean;
}

export type TakeOutcome =
  | { status: 'done'; message: DeadLetter; newMessageId?: string; detail?: string }
  | { status: 'not-found'; detail: string };

/** The port the operator API uses; tests give it the real adapter over the emulator. */
export interface DeadLetterQueues {
  count(source: DeadLetterSource): Promise<DeadLetterCount>;
  peek(source: DeadLetterSource, top: number): Promise<DeadLetter[]>;
  /** Sends a copy of each chosen dead letter to its entity, then removes the dead letter. */
  redrive(source: DeadLetterSource, sequenceNumbers: readonly string[]): Promise<Map<string, TakeOutcome>>;
  /** Removes each chosen dead letter. */
  discard(source: DeadLetterSource, sequenceNumbers: readonly string[]): Promise<Map<string, TakeOutcome>>;
}

/** Peeks per page; a page is one management request. */
const pageSize = 100;
/** Pages a count reads at most (a dashboard tile must stay cheap): counts stop at 1,000. */
const maxCountPages = 10;
/** Dead letters received under lock per batch while looking for the chosen ones. */
const receiveBatch = 50;
/** Dead letters held under lock at most while looking: past these, the rest are "not found". */
const maxHeld = 500;
/** How long one receive waits for the broker when the queue may be empty. */
const receiveWaitMs = 1_000;

/** Dead-letter (and quarantine) bookkeeping; a redriven copy starts without it. */
const deadLetterProperties: readonly string[] = [
  'DeadLetterReason',
  'DeadLetterErrorDescription',
  ...Object.values(poisonProperties),
];

/** Where a dead letter's redriven copy goes; null: nowhere (a quarantined copy naming no queue). */
export function redriveTargetFor(source: DeadLetterSource, m: DeadLetter): string | null {
  const target = redriveTargetOf(
    source,
    queues.poison,
    m.applicationProperties?.[poisonProperties.entity],
    appQueues,
  );
  return target === null ? null : (agentQueueOfWaiting.get(target) ?? target);
}

export const sequenceText = (m: { sequenceNumber?: Long | number }): string =>
  m.sequenceNumber === undefined ? '' : Long.fromValue(m.sequenceNumber).toString();

/** The copy a redrive sends: the same content and metadata, a new (deterministic) message id. */
export function redriveCopy(source: DeadLetterSource, m: DeadLetter): ServiceBusMessage {
  const applicationProperties: Record<string, string | number | boolean | Date | null> = {};
  for (const [k, v] of Object.entries(m.applicationProperties ?? {})) {
    if (!deadLetterProperties.includes(k))
      applicationProperties[k] = v as string | number | boolean | Date | null;
  }
  applicationProperties.redrivenFrom = source.name;
  applicationProperties.redrivenSequenceNumber = sequenceText(m);
  if (m.messageId !== undefined) applicationProperties.redrivenMessageId = String(m.messageId);
  // A topic delivers the copy to every subscription whose filter matches; this tells the others
  // that the copy was meant for one of them (a subscriber may drop copies not meant for it).
  if (source.kind === 'subscription') applicationProperties.redrivenFor = source.subscription;
  const copy: ServiceBusMessage = {
    messageId: redriveMessageId(source.name, sequenceText(m)),
    body: m.body,
    applicationProperties,
  };
  if (m.contentType !== undefined) copy.contentType = m.contentType;
  if (m.correlationId !== undefined) copy.correlationId = m.correlationId;
  if (m.subject !== undefined) copy.subject = m.subject;
  return copy;
}

export class ServiceBusDeadLetters implements DeadLetterQueues {
  constructor(private readonly client: ServiceBusClient) {}

  private receiver(source: DeadLetterSource): ServiceBusReceiver {
    return source.kind === 'queue'
      ? this.client.createReceiver(source.queue, { subQueueType: 'deadLetter' })
      : this.client.createReceiver(source.topic, source.subscription, { subQueueType: 'deadLetter' });
  }

  /**
   * Peeks page by page, each page naming its first sequence number: the SDK's own peek cursor is
   * shared by every receiver of the client, so a concurrent peek elsewhere would move it.
   */
  private async *pages(receiver: ServiceBusReceiver, maxPages: number, first = pageSize) {
    let from = Long.ZERO;
    for (let page = 0; page < maxPages; page++) {
      const batch = await receiver.peekMessages(page === 0 ? first : pageSize, { fromSequenceNumber: from });
      if (batch.length === 0) return;
      yield batch;
      const last = batch[batch.length - 1]!.sequenceNumber;
      if (last === undefined) return;
      from = Long.fromValue(last).add(1);
    }
  }

  async count(source: DeadLetterSource): Promise<DeadLetterCount> {
    const receiver = this.receiver(source);
    try {
      let count = 0;
      let pages = 0;
      for await (const batch of this.pages(receiver, maxCountPages)) {
        count += batch.length;
        pages += 1;
      }
      return { count, capped: pages === maxCountPages };
    } finally {
      await receiver.close().catch(() => undefined);
    }
  }

  async peek(source: DeadLetterSource, top: number): Promise<DeadLetter[]> {
    const receiver = this.receiver(source);
    try {
      const out: DeadLetter[] = [];
      for await (const batch of this.pages(
        receiver,
        Math.ceil(top / pageSize) + 1,
        Math.min(top, pageSize),
      )) {
        out.push(...batch);
        if (out.length >= top) break;
      }
      return out.slice(0, top);
    } finally {
      await receiver.close().catch(() => undefined);
    }
  }

  redrive(source: DeadLetterSource, sequenceNumbers: readonly string[]) {
    // One sender per target: a quarantined poison message goes back to the queue it came from.
    const senders = new Map<string, ServiceBusSender>();
    return this.take(
      source,
      sequenceNumbers,
      async (m) => {
        const target = redriveTargetFor(source, m);
        if (target === null)
          return {
            skip: `Dead letter ${sequenceText(m)} of ${source.name} names no queue of this app to go back to.`,
          };
        let sender = senders.get(target);
        if (!sender) senders.set(target, (sender = this.client.createSender(target)));
        const copy = redriveCopy(source, m);
        await sender.sendMessages(copy);
        return String(copy.messageId);
      },
      async () => {
        await Promise.allSettled([...senders.values()].map((s) => s.close()));
      },
    );
  }

  discard(source: DeadLetterSource, sequenceNumbers: readonly string[]) {
    return this.take(source, sequenceNumbers, async () => undefined);
  }

  /**
   * Service Bus receives a dead letter by sequence number only if it was deferred, so the chosen
   * ones are found by receiving under lock in small batches, acting on each chosen one (send the
   * copy, THEN complete: a crash between the two leaves the dead letter, whose next redrive sends
   * a copy with the same id, absorbed by duplicate detection) and abandoning the others at the
   * end. A dead letter another operator holds locked is not received here: it is "not found",
   * which is what two concurrent redrives of one message need (one copy). A peek first answers
   * "not found" for numbers that are not there at all, without taking any lock.
   */
  private async take(
    source: DeadLetterSource,
    sequenceNumbers: readonly string[],
    act: (m: DeadLetter) => Promise<string | undefined | { skip: string }>,
    cleanup: () => Promise<void> = async () => undefined,
  ): Promise<Map<string, TakeOutcome>> {
    const results = new Map<string, TakeOutcome>();
    const receiver = this.receiver(source);
    const held: DeadLetter[] = [];
    try {
      const wanted = new Set<string>();
      for (const seq of new Set(sequenceNumbers)) {
        const [there] = await receiver.peekMessages(1, { fromSequenceNumber: Long.fromString(seq) });
        if (there && sequenceText(there) === seq) wanted.add(seq);
        else results.set(seq, { status: 'not-found', detail: `No dead letter ${seq} in ${source.name}.` });
      }
      let seen = 0;
      while (wanted.size > 0 && seen < maxHeld) {
        const batch = await receiver.receiveMessages(Math.min(receiveBatch, maxHeld - seen), {
          maxWaitTimeInMs: receiveWaitMs,
        });
        if (batch.length === 0) break;
        seen += batch.length;
        for (const m of batch) {
          const seq = sequenceText(m);
          if (!wanted.has(seq)) {
            held.push(m);
            continue;
          }
          wanted.delete(seq);
          let newMessageId: string | undefined;
          try {
            const acted = await act(m);
            if (typeof acted === 'object') {
              held.push(m); // nothing to do with it: it stays a dead letter
              results.set(seq, { status: 'not-found', detail: acted.skip });
              continue;
            }
            newMessageId = acted;
          } catch (e) {
            held.push(m); // not sent: it stays a dead letter
            throw e;
          }
          try {
            await receiver.completeMessage(m);
            results.set(seq, { status: 'done', message: m, ...(newMessageId ? { newMessageId } : {}) });
          } catch (e) {
            // The copy is out; the dead letter stays (lock lost). Its next redrive sends the same id.
            results.set(seq, {
              status: 'done',
              message: m,
              ...(newMessageId ? { newMessageId } : {}),
              detail: `Done, but the dead letter could not be removed (${(e as Error).message}); it is still listed.`,
            });
          }
        }
      }
      for (const seq of wanted) {
        results.set(seq, {
          status: 'not-found',
          detail:
            seen >= maxHeld
              ? `Dead letter ${seq} was not among the first ${maxHeld} of ${source.name} that could be received; act on earlier ones first.`
              : `Dead letter ${seq} of ${source.name} is gone or held by another operator's action.`,
        });
      }
      return results;
    } finally {
      await Promise.allSettled(held.map((m) => receiver.abandonMessage(m)));
      await receiver.close().catch(() => undefined);
      await cleanup().catch(() => undefined);
    }
  }
}
