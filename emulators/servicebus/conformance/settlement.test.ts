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

const queue = 'conf-settle'; // LockDuration PT5S, MaxDeliveryCount 3
const deferQueue = 'conf-defer';

describe('settlement: dead-letter, MaxDeliveryCount, defer, settlement without the link', () => {
  let ns: Namespace;
  let client: ServiceBusClient;

  before(async () => {
    ns = await openNamespace();
    client = newClient(ns);
    await purgeQueues(client, [queue, deferQueue]);
  });

  after(async () => {
    await client.close();
    await ns.close();
  });

  it('dead-letters with reason and description, readable from the dead-letter sub-queue', async () => {
    const sender = client.createSender(queue);
    const id = uniqueId('dl');
    await sender.sendMessages({ body: { order: 7 }, messageId: id, applicationProperties: { keep: 'me' } });
    await sender.close();
    const receiver = client.createReceiver(queue);
    const [m] = await receiveAtLeast(receiver, 1);
    await receiver.deadLetterMessage(m, {
      deadLetterReason: 'BadInput',
      deadLetterErrorDescription: 'order 7 is malformed',
    });
    assert.equal(
      (await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 })).length,
      0,
      'gone from the queue',
    );
    await receiver.close();

    const dlq = client.createReceiver(queue, { subQueueType: 'deadLetter' });
    const [dead] = await receiveAtLeast(dlq, 1);
    assert.equal(dead.messageId, id);
    assert.deepEqual(dead.body, { order: 7 });
    assert.equal(dead.deadLetterReason, 'BadInput');
    assert.equal(dead.deadLetterErrorDescription, 'order 7 is malformed');
    assert.equal(dead.applicationProperties?.keep, 'me');
    assert.equal(dead.sequenceNumber!.toNumber(), m.sequenceNumber!.toNumber());
    await dlq.completeMessage(dead);
    assert.equal((await dlq.receiveMessages(1, { maxWaitTimeInMs: 500 })).length, 0, 'DLQ message completed');
    await dlq.close();
  });

  it('moves a message to the DLQ with MaxDeliveryCountExceeded after MaxDeliveryCount attempts', async () => {
    const sender = client.createSender(queue);
    const id = uniqueId('mdc');
    await sender.sendMessages({ body: 'poison', messageId: id });
    await sender.close();
    const receiver = client.createReceiver(queue);
    const counts: number[] = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      const [m] = await receiveAtLeast(receiver, 1);
      assert.equal(m.messageId, id);
      counts.push(m.deliveryCount!);
      await receiver.abandonMessage(m);
    }
    assert.deepEqual(counts, [0, 1, 2]);
    assert.equal((await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 })).length, 0);
    await receiver.close();
    const dlq = client.createReceiver(queue, { subQueueType: 'deadLetter', receiveMode: 'receiveAndDelete' });
    const [dead] = await receiveAtLeast(dlq, 1);
    assert.equal(dead.messageId, id);
    assert.equal(dead.deadLetterReason, 'MaxDeliveryCountExceeded');
    assert.ok(dead.deadLetterErrorDescription, 'a description is given');
    await dlq.close();
  });

  it('defers, receives deferred messages by sequence number, and settles them', async () => {
    const sender = client.createSender(deferQueue);
    const run = uniqueId('defer');
    await sender.sendMessages([
      { body: 'first', messageId: `${run}-1` },
      { body: 'second', messageId: `${run}-2` },
    ]);
    await sender.close();
    const receiver = client.createReceiver(deferQueue);
    const got = await receiveAtLeast(receiver, 2);
    const seqs = got.map((m) => m.sequenceNumber!);
    for (const m of got) await receiver.deferMessage(m, { deferredBy: 'test' });
    assert.equal(
      (await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 })).length,
      0,
      'deferred are not delivered',
    );

    const peeked = await receiver.peekMessages(10, { fromSequenceNumber: seqs[0] });
    assert.deepEqual(
      peeked.map((m) => m.state),
      ['deferred', 'deferred'],
    );

    const deferred = await receiver.receiveDeferredMessages(seqs);
    assert.deepEqual(deferred.map((m) => m.body).sort(), ['first', 'second']);
    for (const m of deferred) {
      assert.ok(m.lockToken);
      assert.equal(m.state, 'deferred');
      assert.equal(m.applicationProperties?.deferredBy, 'test');
    }
    const first = deferred.find((m) => m.body === 'first')!;
    const second = deferred.find((m) => m.body === 'second')!;
    await receiver.completeMessage(first);
    await receiver.abandonMessage(second);
    // An abandoned deferred message stays deferred.
    const [again] = await receiver.receiveDeferredMessages([second.sequenceNumber!]);
    assert.equal(again.body, 'second');
    await receiver.deadLetterMessage(again, {
      deadLetterReason: 'GaveUp',
      deadLetterErrorDescription: 'deferred too long',
    });
    await assert.rejects(
      receiver.receiveDeferredMessages([first.sequenceNumber!]),
      (err: { code?: string }) => {
        assert.equal(err.code, 'MessageNotFound');
        return true;
      },
    );
    await receiver.close();
    const dlq = client.createReceiver(deferQueue, {
      subQueueType: 'deadLetter',
      receiveMode: 'receiveAndDelete',
    });
    const [dead] = await receiveAtLeast(dlq, 1);
    assert.equal(dead.body, 'second');
    assert.equal(dead.deadLetterReason, 'GaveUp');
    await dlq.close();
  });

  it('settles through $management when the receive link is gone', async () => {
    const sender = client.createSender(queue);
    const run = uniqueId('mgmt');
    await sender.sendMessages([
      { body: 'complete-me', messageId: `${run}-c` },
      { body: 'abandon-me', messageId: `${run}-a` },
    ]);
    await sender.close();
    const first = client.createReceiver(queue);
    const got = await receiveAtLeast(first, 2);
    await first.close();
    const second = client.createReceiver(queue);
    const complete = got.find((m) => m.body === 'complete-me')!;
    const abandon = got.find((m) => m.body === 'abandon-me')!;
    await second.completeMessage(complete);
    await second.abandonMessage(abandon, { via: 'management' });
    const [back] = await receiveAtLeast(second, 1);
    assert.equal(back.body, 'abandon-me');
    assert.equal(back.deliveryCount, 1);
    assert.equal(back.applicationProperties?.via, 'management');
    await second.completeMessage(back);
    assert.equal((await second.receiveMessages(1, { maxWaitTimeInMs: 500 })).length, 0);
    await second.close();
  });
});
