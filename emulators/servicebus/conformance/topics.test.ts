import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ServiceBusClient } from '@azure/service-bus';
import { newClient, openNamespace, purge, receiveAtLeast, uniqueId, type Namespace } from './harness.js';

const topic = 'conf-topic';
const subscriptions = ['all', 'high-priority', 'order-created'];

describe('topics and subscriptions', () => {
  let ns: Namespace;
  let client: ServiceBusClient;

  before(async () => {
    ns = await openNamespace();
    client = newClient(ns);
    for (const sub of subscriptions) {
      for (const subQueueType of [undefined, 'deadLetter'] as const) {
        const r = client.createReceiver(topic, sub, { receiveMode: 'receiveAndDelete', subQueueType });
        await purge(client, r);
        await r.close();
      }
    }
  });

  after(async () => {
    await client.close();
    await ns.close();
  });

  it('fans out to every subscription whose filter matches (default true filter and correlation filters)', async () => {
    const sender = client.createSender(topic);
    const run = uniqueId('fan');
    await sender.sendMessages([
      { body: 'plain', messageId: `${run}-plain` },
      { body: 'urgent', messageId: `${run}-urgent`, applicationProperties: { priority: 'high' } },
      {
        body: 'created',
        messageId: `${run}-created`,
        subject: 'order-created',
        contentType: 'application/json',
      },
      { body: 'wrong-type', messageId: `${run}-wrong`, subject: 'order-created', contentType: 'text/plain' },
    ]);
    await sender.close();
    const expected: Record<string, string[]> = {
      all: ['plain', 'urgent', 'created', 'wrong-type'],
      'high-priority': ['urgent'],
      'order-created': ['created'],
    };
    for (const sub of subscriptions) {
      const r = client.createReceiver(topic, sub, { receiveMode: 'receiveAndDelete' });
      const got = await receiveAtLeast(r, expected[sub].length);
      assert.deepEqual(
        got.map((m) => m.body),
        expected[sub],
        sub,
      );
      assert.equal(
        (await r.receiveMessages(5, { maxWaitTimeInMs: 500 })).length,
        0,
        `${sub} has nothing more`,
      );
      await r.close();
    }
  });

  it('gives each subscription its own locks, delivery counts and dead-letter queue', async () => {
    const sender = client.createSender(topic);
    const id = uniqueId('sub');
    await sender.sendMessages({ body: 'both', messageId: id, applicationProperties: { priority: 'high' } });
    await sender.close();
    const all = client.createReceiver(topic, 'all');
    const high = client.createReceiver(topic, 'high-priority');
    const [a] = await receiveAtLeast(all, 1);
    const [h] = await receiveAtLeast(high, 1);
    assert.equal(a.messageId, id);
    assert.equal(h.messageId, id);
    assert.notEqual(a.lockToken, h.lockToken);
    await all.completeMessage(a);
    // MaxDeliveryCount is 2 on the subscription.
    await high.abandonMessage(h);
    const [h2] = await receiveAtLeast(high, 1);
    assert.equal(h2.deliveryCount, 1);
    await high.abandonMessage(h2);
    assert.equal((await high.receiveMessages(1, { maxWaitTimeInMs: 500 })).length, 0);
    await all.close();
    await high.close();
    const dlq = client.createReceiver(topic, 'high-priority', { subQueueType: 'deadLetter' });
    const [dead] = await receiveAtLeast(dlq, 1);
    assert.equal(dead.messageId, id);
    assert.equal(dead.deadLetterReason, 'MaxDeliveryCountExceeded');
    await dlq.completeMessage(dead);
    await dlq.close();
    const allDlq = client.createReceiver(topic, 'all', { subQueueType: 'deadLetter' });
    assert.equal(
      (await allDlq.receiveMessages(1, { maxWaitTimeInMs: 500 })).length,
      0,
      'other subscription untouched',
    );
    await allDlq.close();
  });

  it('rejects an unknown subscription with MessagingEntityNotFound', async () => {
    const r = client.createReceiver(topic, 'no-such-subscription');
    await assert.rejects(r.receiveMessages(1, { maxWaitTimeInMs: 1_000 }), (err: { code?: string }) => {
      assert.equal(err.code, 'MessagingEntityNotFound');
      return true;
    });
    await r.close();
  });
});
