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

const sizeQueue = 'conf-sdk-size';
const topic = 'conf-topic';

/** Standard tier's maximum message size. */
const MAX_MESSAGE_BYTES = 256 * 1024;

describe('limits, error texts and peeked states', () => {
  let ns: Namespace;
  let client: ServiceBusClient;

  before(async () => {
    ns = await openNamespace();
    client = newClient(ns);
    await purgeQueues(client, [sizeQueue]);
  });

  after(async () => {
    await client.close();
    await ns.close();
  });

  it('refuses a message larger than 256 KB with MessageSizeExceeded and keeps the link usable', async () => {
    const sender = client.createSender(sizeQueue);
    await assert.rejects(
      sender.sendMessages({ body: Buffer.alloc(MAX_MESSAGE_BYTES + 1024, 1), messageId: uniqueId('big') }),
      (err: { code?: string }) => {
        assert.equal(err.code, 'MessageSizeExceeded');
        return true;
      },
    );
    const id = uniqueId('fits');
    const body = Buffer.alloc(MAX_MESSAGE_BYTES - 4096, 2);
    await sender.sendMessages({ body, messageId: id });
    await sender.close();
    const receiver = client.createReceiver(sizeQueue, { receiveMode: 'receiveAndDelete' });
    const [got] = await receiveAtLeast(receiver, 1);
    assert.equal(got.messageId, id, 'only the message that fits was stored');
    assert.equal((got.body as Buffer).length, body.length);
    assert.equal((await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 })).length, 0);
    await receiver.close();
  });

  it('refuses to schedule a message larger than 256 KB with MessageSizeExceeded', async () => {
    const sender = client.createSender(sizeQueue);
    const due = new Date(Date.now() + 60 * 60_000);
    await assert.rejects(
      sender.scheduleMessages(
        { body: Buffer.alloc(MAX_MESSAGE_BYTES + 1024, 3), messageId: uniqueId('big') },
        due,
      ),
      (err: { code?: string }) => {
        assert.equal(err.code, 'MessageSizeExceeded');
        return true;
      },
    );
    const peeked = await client.createReceiver(sizeQueue).peekMessages(10);
    assert.equal(peeked.length, 0, 'nothing was scheduled');
    await sender.close();
  });

  it('names the host the client used in the entity-not-found error', async () => {
    const sender = client.createSender('no-such-queue');
    await assert.rejects(sender.sendMessages({ body: 'x' }), (err: { code?: string; message?: string }) => {
      assert.equal(err.code, 'MessagingEntityNotFound');
      assert.ok(
        String(err.message).includes(`'sb://${client.fullyQualifiedNamespace}/no-such-queue'`),
        `${err.message} names sb://${client.fullyQualifiedNamespace}/no-such-queue`,
      );
      return true;
    });
    await sender.close();
    const receiver = client.createReceiver(topic, 'no-such-subscription');
    await assert.rejects(
      receiver.receiveMessages(1, { maxWaitTimeInMs: 1_000 }),
      (err: { message?: string }) => {
        assert.ok(
          String(err.message).includes(`sb://${client.fullyQualifiedNamespace}/`),
          String(err.message),
        );
        assert.ok(!String(err.message).includes('sb://localhost/'), String(err.message));
        return true;
      },
    );
    await receiver.close();
  });

  it('reports a peeked scheduled message as scheduled, on a queue and on a subscription', async () => {
    const due = new Date(Date.now() + 60 * 60_000);
    const run = uniqueId('peek-sched');
    const queueSender = client.createSender(sizeQueue);
    const [queueSeq] = await queueSender.scheduleMessages({ body: 'later', messageId: `${run}-q` }, due);
    const batch = await queueSender.createMessageBatch();
    assert.ok(batch.tryAddMessage({ body: 'in-batch', messageId: `${run}-b`, scheduledEnqueueTimeUtc: due }));
    await queueSender.sendMessages(batch);
    const topicSender = client.createSender(topic);
    const [topicSeq] = await topicSender.scheduleMessages({ body: 'later', messageId: `${run}-t` }, due);

    const queuePeek = await client.createReceiver(sizeQueue).peekMessages(10);
    const queued = queuePeek.find((m) => m.messageId === `${run}-q`);
    assert.ok(queued, 'peeked on the queue');
    assert.equal(queued.state, 'scheduled');
    assert.equal(queued.scheduledEnqueueTimeUtc?.getTime(), due.getTime());
    const batched = queuePeek.find((m) => m.messageId === `${run}-b`);
    assert.equal(batched?.state, 'scheduled', 'sent in a batch with scheduledEnqueueTimeUtc');
    const [bySeq] = await client.createReceiver(sizeQueue).peekMessages(1, { fromSequenceNumber: queueSeq });
    assert.equal(bySeq?.state, 'scheduled', 'peeked from its sequence number');

    const subPeek = await client.createReceiver(topic, 'all').peekMessages(10);
    const inSub = subPeek.find((m) => m.messageId === `${run}-t`);
    assert.ok(inSub, 'peeked on the subscription');
    assert.equal(inSub.state, 'scheduled');

    await queueSender.cancelScheduledMessages([queueSeq, batched.sequenceNumber!]);
    await topicSender.cancelScheduledMessages(topicSeq);
    await queueSender.close();
    await topicSender.close();
  });
});
