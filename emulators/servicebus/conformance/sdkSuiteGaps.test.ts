/**
 * The two behaviours behind the last failures of Microsoft's JavaScript SDK suite against the
 * emulator (issue 28): a scheduled message keeps reporting `scheduled` when it is received after
 * it became due, and a peek that omits the body returns no body at all (no `null` body section).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { PeekMessagesOptions, ServiceBusClient } from '@azure/service-bus';
import {
  newClient,
  openNamespace,
  purgeQueues,
  receiveAtLeast,
  uniqueId,
  type Namespace,
} from './harness.js';

const queue = 'conf-sdk-size';

describe('states and bodies as Service Bus reports them', () => {
  let ns: Namespace;
  let client: ServiceBusClient;

  before(async () => {
    ns = await openNamespace();
    client = newClient(ns);
    await purgeQueues(client, [queue]);
  });

  after(async () => {
    await client.close();
    await ns.close();
  });

  it('a scheduled message received after it became due still reports the state scheduled', async () => {
    const sender = client.createSender(queue);
    const messageId = uniqueId('due');
    const due = new Date(Date.now() + 1500);
    await sender.scheduleMessages({ body: 'due soon', messageId }, due);
    const receiver = client.createReceiver(queue);
    const [got] = await receiveAtLeast(receiver, 1, 15_000);
    assert.equal(got.messageId, messageId);
    assert.equal(got.state, 'scheduled');
    assert.ok(got.enqueuedTimeUtc!.getTime() >= due.getTime() - 100);
    await receiver.completeMessage(got);
    await receiver.close();
    await sender.close();
  });

  it('a plainly sent message reports active, and peeking without the body returns no body', async () => {
    const sender = client.createSender(queue);
    const messageId = uniqueId('nobody');
    await sender.sendMessages({ body: 'a body', messageId, applicationProperties: { kept: 1 } });
    const receiver = client.createReceiver(queue);
    // 7.9.5 passes the option through without declaring it (later versions declare it).
    const [peeked] = await receiver.peekMessages(1, { omitMessageBody: true } as PeekMessagesOptions);
    assert.equal(peeked.messageId, messageId);
    assert.equal(peeked.body, undefined);
    assert.equal(peeked.applicationProperties?.kept, 1);
    assert.equal(peeked.state, 'active');
    const [withBody] = await receiver.peekMessages(1, { fromSequenceNumber: peeked.sequenceNumber });
    assert.equal(withBody.body, 'a body');
    const [got] = await receiveAtLeast(receiver, 1, 10_000);
    assert.equal(got.state, 'active');
    await receiver.completeMessage(got);
    await receiver.close();
    await sender.close();
  });
});
