import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ServiceBusClient } from '@azure/service-bus';
import {
  newClient,
  openNamespace,
  purgeQueues,
  receiveAtLeast,
  sleep,
  uniqueId,
  type Namespace,
} from './harness.js';

const timingQueue = 'conf-timing'; // DeadLetteringOnMessageExpiration: true
const dropQueue = 'conf-expire-drop'; // DeadLetteringOnMessageExpiration: false
const dedupeQueue = 'conf-dedupe'; // RequiresDuplicateDetection, window PT1M
const forwardQueue = 'conf-forward'; // ForwardTo: conf-forward-target

describe('scheduling, time-to-live, duplicate detection, forwarding', () => {
  let ns: Namespace;
  let client: ServiceBusClient;

  before(async () => {
    ns = await openNamespace();
    client = newClient(ns);
    await purgeQueues(client, [timingQueue, dropQueue, dedupeQueue, 'conf-forward-target']);
  });

  after(async () => {
    await client.close();
    await ns.close();
  });

  it('schedules messages, hides them until due, and cancels them', async () => {
    const sender = client.createSender(timingQueue);
    const run = uniqueId('sched');
    const due = new Date(Date.now() + 2_500);
    const [keep, cancel] = await sender.scheduleMessages(
      [
        { body: 'keep', messageId: `${run}-keep` },
        { body: 'cancel', messageId: `${run}-cancel` },
      ],
      due,
    );
    assert.ok(keep.greaterThan(0) && cancel.greaterThan(0) && !keep.equals(cancel));
    await sender.sendMessages({ body: 'inline', messageId: `${run}-inline`, scheduledEnqueueTimeUtc: due });
    const peeked = await client.createReceiver(timingQueue).peekMessages(10, { fromSequenceNumber: keep });
    const scheduled = peeked.filter((m) => String(m.messageId).startsWith(run));
    assert.equal(scheduled.length, 3);
    for (const m of scheduled) assert.equal(m.state, 'scheduled');
    await sender.cancelScheduledMessages([cancel]);
    await sender.close();

    const receiver = client.createReceiver(timingQueue, { receiveMode: 'receiveAndDelete' });
    const early = await receiver.receiveMessages(5, { maxWaitTimeInMs: 500 });
    assert.equal(
      early.filter((m) => String(m.messageId).startsWith(run)).length,
      Date.now() < due.getTime() ? 0 : early.length,
      'nothing before it is due',
    );
    const got = [...early, ...(await receiveAtLeast(receiver, 2 - early.length))];
    assert.deepEqual(got.map((m) => m.body).sort(), ['inline', 'keep']);
    for (const m of got)
      assert.ok(m.enqueuedTimeUtc!.getTime() >= due.getTime() - 1_000, 'enqueued when due');
    assert.equal(
      (await receiver.receiveMessages(5, { maxWaitTimeInMs: 1_000 })).length,
      0,
      'cancelled never arrives',
    );
    await receiver.close();
  });

  it('dead-letters expired messages with TTLExpiredException when the entity asks for it', async () => {
    const sender = client.createSender(timingQueue);
    const id = uniqueId('ttl');
    await sender.sendMessages({ body: 'short-lived', messageId: id, timeToLive: 1_000 });
    await sender.sendMessages({ body: 'long-lived', messageId: `${id}-long`, timeToLive: 60_000 });
    await sender.close();
    await sleep(2_000);
    const receiver = client.createReceiver(timingQueue, { receiveMode: 'receiveAndDelete' });
    const live = await receiveAtLeast(receiver, 1);
    assert.deepEqual(
      live.map((m) => m.body),
      ['long-lived'],
    );
    assert.equal((await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 })).length, 0);
    await receiver.close();
    const dlq = client.createReceiver(timingQueue, {
      subQueueType: 'deadLetter',
      receiveMode: 'receiveAndDelete',
    });
    const [dead] = await receiveAtLeast(dlq, 1);
    assert.equal(dead.messageId, id);
    assert.equal(dead.deadLetterReason, 'TTLExpiredException');
    assert.equal(dead.timeToLive, 1_000);
    await dlq.close();
  });

  it('drops expired messages when the entity does not dead-letter on expiration', async () => {
    const sender = client.createSender(dropQueue);
    await sender.sendMessages({ body: 'gone', messageId: uniqueId('drop'), timeToLive: 1_000 });
    await sender.close();
    await sleep(2_000);
    const receiver = client.createReceiver(dropQueue, { receiveMode: 'receiveAndDelete' });
    assert.equal((await receiver.receiveMessages(1, { maxWaitTimeInMs: 1_000 })).length, 0);
    await receiver.close();
    const dlq = client.createReceiver(dropQueue, {
      subQueueType: 'deadLetter',
      receiveMode: 'receiveAndDelete',
    });
    assert.equal((await dlq.receiveMessages(1, { maxWaitTimeInMs: 1_000 })).length, 0);
    await dlq.close();
  });

  it('drops a message whose MessageId was seen within the duplicate detection window', async () => {
    const sender = client.createSender(dedupeQueue);
    const id = uniqueId('dup');
    await sender.sendMessages({ body: 'first', messageId: id });
    await sender.sendMessages({ body: 'second', messageId: id });
    await sender.sendMessages([
      { body: 'third', messageId: id },
      { body: 'other', messageId: `${id}-other` },
    ]);
    await sender.close();
    const receiver = client.createReceiver(dedupeQueue, { receiveMode: 'receiveAndDelete' });
    const got = await receiveAtLeast(receiver, 2);
    assert.deepEqual(
      got.map((m) => m.body),
      ['first', 'other'],
    );
    assert.equal((await receiver.receiveMessages(5, { maxWaitTimeInMs: 1_000 })).length, 0);
    await receiver.close();
  });

  it('forwards messages to the ForwardTo entity', async () => {
    const sender = client.createSender(forwardQueue);
    const id = uniqueId('fwd');
    await sender.sendMessages({ body: 'hop', messageId: id });
    await sender.close();
    const target = client.createReceiver('conf-forward-target', { receiveMode: 'receiveAndDelete' });
    const [m] = await receiveAtLeast(target, 1);
    assert.equal(m.messageId, id);
    assert.equal(m.body, 'hop');
    await target.close();
  });
});
