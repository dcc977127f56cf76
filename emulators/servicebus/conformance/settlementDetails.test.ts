import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ServiceBusClient } from '@azure/service-bus';
import {
  newClient,
  openNamespace,
  purgeQueues,
  receiveAtLeast,
  uniqueId,
  type Namespace,
} from './harness.js';

const deferQueue = 'conf-sdk-defer'; // LockDuration PT5S, MaxDeliveryCount 5
const dlqQueue = 'conf-sdk-dlq'; // LockDuration PT5S, MaxDeliveryCount 5

/**
 * Delivery counts and dead-letter-queue settlement as the Azure SDK for JavaScript's own test
 * suite expects them from Service Bus (deferredMessage.spec.ts, batchReceiver.spec.ts).
 */
describe('settlement details: delivery counts, the dead-letter queue, dead-letter properties', () => {
  let ns: Namespace;
  let client: ServiceBusClient;

  before(async () => {
    ns = await openNamespace();
    client = newClient(ns);
    await purgeQueues(client, [deferQueue, dlqQueue]);
  });

  after(async () => {
    await client.close();
    await ns.close();
  });

  it('counts every receive of a deferred message by sequence number as a delivery', async () => {
    const sender = client.createSender(deferQueue);
    const id = uniqueId('defer-count');
    await sender.sendMessages({ body: 'deferred', messageId: id });
    await sender.close();
    const receiver = client.createReceiver(deferQueue);
    const [first] = await receiveAtLeast(receiver, 1);
    assert.equal(first.deliveryCount, 0);
    await receiver.deferMessage(first);

    const [second] = await receiver.receiveDeferredMessages(first.sequenceNumber!);
    assert.equal(second.messageId, id);
    assert.equal(second.deliveryCount, 1, 'the first receive by sequence number is a second delivery');
    await receiver.abandonMessage(second);

    // An abandoned deferred message stays deferred; the next receive counts once, not twice.
    const [third] = await receiver.receiveDeferredMessages(first.sequenceNumber!);
    assert.equal(third.deliveryCount, 2);
    await receiver.deferMessage(third);

    const [fourth] = await receiver.receiveDeferredMessages(first.sequenceNumber!);
    assert.equal(fourth.deliveryCount, 3);
    await receiver.deadLetterMessage(fourth, {
      deadLetterReason: 'Done',
      deadLetterErrorDescription: 'test',
    });
    await receiver.close();

    const dlq = client.createReceiver(deferQueue, {
      subQueueType: 'deadLetter',
      receiveMode: 'receiveAndDelete',
    });
    const [dead] = await receiveAtLeast(dlq, 1);
    assert.equal(dead.messageId, id);
    assert.equal(dead.deliveryCount, 3, 'the dead-letter queue keeps the count it had');
    await dlq.close();
  });

  it('keeps the delivery count of a dead-letter-queue message when it is abandoned', async () => {
    const sender = client.createSender(dlqQueue);
    const id = uniqueId('dlq-abandon');
    await sender.sendMessages({ body: 'to-dlq', messageId: id });
    await sender.close();
    const receiver = client.createReceiver(dlqQueue);
    const [m] = await receiveAtLeast(receiver, 1);
    await receiver.deadLetterMessage(m, { deadLetterReason: 'Test', deadLetterErrorDescription: 'abandon' });
    await receiver.close();

    const dlq = client.createReceiver(dlqQueue, { subQueueType: 'deadLetter' });
    const [dead] = await receiveAtLeast(dlq, 1);
    assert.equal(dead.deliveryCount, 0);
    await dlq.abandonMessage(dead);
    const [again] = await receiveAtLeast(dlq, 1);
    assert.equal(again.messageId, id);
    assert.equal(again.deliveryCount, 0, 'abandoning in the dead-letter queue counts nothing');
    await dlq.abandonMessage(again);
    const [third] = await receiveAtLeast(dlq, 1);
    assert.equal(third.deliveryCount, 0);
    await dlq.completeMessage(third);
    await dlq.close();
  });

  it('keeps the custom properties passed when dead-lettering on the receive link', async () => {
    const sender = client.createSender(dlqQueue);
    const id = uniqueId('dl-props');
    await sender.sendMessages({ body: 'props', messageId: id, applicationProperties: { sent: 'yes' } });
    await sender.close();
    const receiver = client.createReceiver(dlqQueue);
    const [m] = await receiveAtLeast(receiver, 1);
    await receiver.deadLetterMessage(m, {
      deadLetterReason: 'Invalid',
      deadLetterErrorDescription: 'bad total',
      failedStep: 'payment',
      attempt: 3,
    });
    await receiver.close();

    const dlq = client.createReceiver(dlqQueue, {
      subQueueType: 'deadLetter',
      receiveMode: 'receiveAndDelete',
    });
    const [dead] = await receiveAtLeast(dlq, 1);
    assert.equal(dead?.messageId, id);
    assert.equal(dead.deadLetterReason, 'Invalid');
    assert.equal(dead.deadLetterErrorDescription, 'bad total');
    assert.equal(dead.applicationProperties?.failedStep, 'payment');
    assert.equal(dead.applicationProperties?.attempt, 3);
    assert.equal(dead.applicationProperties?.sent, 'yes');
    await dlq.close();
  });

  it('refuses to dead-letter a message that is already in the dead-letter queue, and keeps it there', async () => {
    const sender = client.createSender(dlqQueue);
    const id = uniqueId('dlq-twice');
    await sender.sendMessages({ body: 'twice', messageId: id });
    await sender.close();
    const receiver = client.createReceiver(dlqQueue);
    const [m] = await receiveAtLeast(receiver, 1);
    await receiver.deadLetterMessage(m, { deadLetterReason: 'First', deadLetterErrorDescription: 'once' });
    await receiver.close();

    const dlq = client.createReceiver(dlqQueue, { subQueueType: 'deadLetter' });
    const [dead] = await receiveAtLeast(dlq, 1);
    await assert.rejects(
      dlq.deadLetterMessage(dead, { deadLetterReason: 'Second', deadLetterErrorDescription: 'twice' }),
      (err: { code?: string; message?: string }) => {
        assert.equal(err.code, 'GeneralError');
        assert.match(String(err.message), /dead-letter/i);
        return true;
      },
    );
    const [still] = await dlq.peekMessages(1);
    assert.equal(still?.messageId, id, 'still in the dead-letter queue');
    assert.equal(still.deadLetterReason, 'First', 'with its first reason');
    const queuePeek = await client.createReceiver(dlqQueue).peekMessages(1);
    assert.equal(queuePeek.length, 0, 'and not back in the queue');
    // Settled on the link by the refusal; the lock still holds it for this receiver.
    assert.ok(dead.lockToken);
    await dlq.close();
  });
});
