import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Long from 'long';
import type { ServiceBusClient, ServiceBusReceivedMessage, ServiceBusReceiver } from '@azure/service-bus';
import {
  newClient,
  openNamespace,
  purge,
  purgeQueues,
  receiveAtLeast,
  uniqueId,
  type Namespace,
} from './harness.js';

const queue = 'conf-dlq-redrive'; // LockDuration PT30S, MaxDeliveryCount 5
const topic = 'conf-dlq-topic';
const subscription = 'watcher'; // no rules: every message sent to the topic

/**
 * The calls an operator's dead-letter redrive makes (shared/messaging/deadLetters.ts): peek a
 * dead-letter queue from a sequence number, with the dead-letter reason and description; receive
 * a few under lock, complete the chosen one and abandon the rest; and a second receiver never
 * gets a message the first still holds (two operators redriving the same message).
 */
describe('dead-letter queues as the redrive uses them', () => {
  let ns: Namespace;
  let client: ServiceBusClient;

  before(async () => {
    ns = await openNamespace();
    client = newClient(ns);
    await purgeQueues(client, [queue]);
    for (const subQueueType of [undefined, 'deadLetter'] as const) {
      const r = client.createReceiver(topic, subscription, { receiveMode: 'receiveAndDelete', subQueueType });
      await purge(client, r);
      await r.close();
    }
  });

  after(async () => {
    await client.close();
    await ns.close();
  });

  /** Sends `ids`, receives them and dead-letters each with reason `reason-<id>`. */
  async function deadLettered(
    receiver: ServiceBusReceiver,
    send: (ids: string[]) => Promise<void>,
    ids: string[],
  ) {
    await send(ids);
    const got = await receiveAtLeast(receiver, ids.length);
    assert.equal(got.length, ids.length);
    for (const m of got) {
      await receiver.deadLetterMessage(m, {
        deadLetterReason: `reason-${String(m.messageId)}`,
        deadLetterErrorDescription: `description of ${String(m.messageId)}`,
      });
    }
  }

  const seqOf = (m: ServiceBusReceivedMessage) => Long.fromValue(m.sequenceNumber!).toString();

  it('peeks a queue dead-letter queue from a sequence number, with reason, description and body', async () => {
    const ids = ['a', 'b', 'c', 'd'].map((x) => uniqueId(`peek-${x}`));
    const receiver = client.createReceiver(queue);
    const sender = client.createSender(queue);
    await deadLettered(
      receiver,
      (list) =>
        sender.sendMessages(
          list.map((id) => ({ messageId: id, correlationId: `order-${id}`, body: { id } })),
        ),
      ids,
    );
    await sender.close();
    await receiver.close();

    const dlq = client.createReceiver(queue, { subQueueType: 'deadLetter' });
    const all = await dlq.peekMessages(10, { fromSequenceNumber: Long.ZERO });
    assert.deepEqual(
      all.map((m) => m.messageId),
      ids,
      'in sequence order',
    );
    const third = all[2]!;
    assert.equal(third.deadLetterReason, `reason-${ids[2]}`);
    assert.equal(third.deadLetterErrorDescription, `description of ${ids[2]}`);
    assert.equal(third.correlationId, `order-${ids[2]}`);
    assert.deepEqual(third.body, { id: ids[2] });
    // As settlementDetails.test.ts: dead-lettering on the first delivery leaves the count at 0.
    assert.equal(third.deliveryCount, 0);
    assert.ok(third.enqueuedTimeUtc instanceof Date);

    const fromThird = await dlq.peekMessages(10, {
      fromSequenceNumber: Long.fromValue(third.sequenceNumber!),
    });
    assert.deepEqual(
      fromThird.map((m) => m.messageId),
      ids.slice(2),
    );
    const justOne = await dlq.peekMessages(1, { fromSequenceNumber: Long.fromValue(third.sequenceNumber!) });
    assert.deepEqual(justOne.map(seqOf), [seqOf(third)]);
    await dlq.close();
  });

  it('completes a chosen dead letter by sequence number and abandons the others, which stay', async () => {
    const dlq = client.createReceiver(queue, { subQueueType: 'deadLetter' });
    const before = await dlq.peekMessages(10, { fromSequenceNumber: Long.ZERO });
    assert.equal(before.length, 4);
    const chosen = seqOf(before[1]!);
    const held = await receiveAtLeast(dlq, 4);
    assert.equal(held.length, 4);
    for (const m of held) {
      if (seqOf(m) === chosen) await dlq.completeMessage(m);
      else await dlq.abandonMessage(m);
    }
    const after = await dlq.peekMessages(10, { fromSequenceNumber: Long.ZERO });
    assert.deepEqual(after.map(seqOf), before.filter((m) => seqOf(m) !== chosen).map(seqOf));
    const gone = await dlq.peekMessages(1, {
      fromSequenceNumber: Long.fromValue(before[1]!.sequenceNumber!),
    });
    assert.notEqual(gone[0] && seqOf(gone[0]), chosen, 'a peek from its number finds the next one');
    const active = await client.createReceiver(queue).peekMessages(10);
    assert.equal(active.length, 0, 'nothing went back to the queue');
    await dlq.close();
  });

  it('a second receiver does not get the dead letters a first one holds locked', async () => {
    const first = client.createReceiver(queue, { subQueueType: 'deadLetter' });
    const second = client.createReceiver(queue, { subQueueType: 'deadLetter' });
    const held = await receiveAtLeast(first, 3);
    assert.equal(held.length, 3);
    const meanwhile = await second.receiveMessages(10, { maxWaitTimeInMs: 1_000 });
    assert.equal(meanwhile.length, 0, 'all three are locked by the first receiver');
    await first.completeMessage(held[0]!);
    for (const m of held.slice(1)) await first.abandonMessage(m);
    const later = await receiveAtLeast(second, 2);
    assert.deepEqual(later.map(seqOf).sort(), held.slice(1).map(seqOf).sort());
    for (const m of later) await second.completeMessage(m);
    await first.close();
    await second.close();
  });

  it("peeks, receives and completes a subscription's dead letters", async () => {
    const ids = ['x', 'y'].map((x) => uniqueId(`sub-${x}`));
    const receiver = client.createReceiver(topic, subscription);
    const sender = client.createSender(topic);
    await deadLettered(
      receiver,
      (list) => sender.sendMessages(list.map((id) => ({ messageId: id, body: { orderId: id } }))),
      ids,
    );
    await sender.close();
    await receiver.close();

    const dlq = client.createReceiver(topic, subscription, { subQueueType: 'deadLetter' });
    const peeked = await dlq.peekMessages(10, { fromSequenceNumber: Long.ZERO });
    assert.deepEqual(
      peeked.map((m) => m.messageId),
      ids,
    );
    assert.equal(peeked[1]!.deadLetterReason, `reason-${ids[1]}`);
    const fromSecond = await dlq.peekMessages(1, {
      fromSequenceNumber: Long.fromValue(peeked[1]!.sequenceNumber!),
    });
    assert.equal(fromSecond[0]?.messageId, ids[1]);
    const held = await receiveAtLeast(dlq, 2);
    for (const m of held) {
      if (m.messageId === ids[1]) await dlq.completeMessage(m);
      else await dlq.abandonMessage(m);
    }
    const left = await dlq.peekMessages(10, { fromSequenceNumber: Long.ZERO });
    assert.deepEqual(
      left.map((m) => m.messageId),
      [ids[0]],
    );
    await dlq.close();
  });
});
