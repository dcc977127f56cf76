import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ServiceBusClient, ServiceBusReceivedMessage, ServiceBusSender } from '@azure/service-bus';
import {
  newClient,
  openNamespace,
  purgeQueues,
  receiveAtLeast,
  sleep,
  uniqueId,
  type Namespace,
} from './harness.js';

const longLivedQueue = 'conf-long-lived';
const windowQueue = 'conf-dedupe-window'; // RequiresDuplicateDetection, window PT20S

// More than one AMQP session window (2,048 unsettled deliveries in rhea, the SDK's AMQP library):
// a receiver that lives as long as a Functions host must not stop there.
const pastOneWindow = 2_300;

async function sendMany(sender: ServiceBusSender, run: string, count: number): Promise<void> {
  for (let from = 0; from < count;) {
    const batch = await sender.createMessageBatch();
    while (from < count && batch.tryAddMessage({ body: { run, n: from }, messageId: `${run}-${from}` }))
      from++;
    await sender.sendMessages(batch);
  }
}

describe('long-lived receivers, the end of the duplicate-detection window', () => {
  let ns: Namespace;
  let client: ServiceBusClient;

  before(async () => {
    ns = await openNamespace();
    client = newClient(ns);
    await purgeQueues(client, [longLivedQueue, windowQueue]);
  });

  after(async () => {
    await client.close();
    await ns.close();
  });

  it(`one streaming peek-lock receiver completes ${pastOneWindow} messages, past one AMQP session window`, async () => {
    const run = uniqueId('stream');
    const sender = client.createSender(longLivedQueue);
    await sendMany(sender, run, pastOneWindow);
    await sender.close();

    const receiver = client.createReceiver(longLivedQueue);
    const seen = new Set<number>();
    let duplicates = 0;
    let allIn: () => void = () => {};
    const done = new Promise<void>((r) => (allIn = r));
    const subscription = receiver.subscribe(
      {
        processMessage: async (m: ServiceBusReceivedMessage) => {
          const body = m.body as { run: string; n: number };
          if (body.run !== run) return;
          if (seen.has(body.n)) duplicates++;
          seen.add(body.n);
          if (seen.size === pastOneWindow) allIn();
        },
        processError: async () => {},
      },
      { autoCompleteMessages: true, maxConcurrentCalls: 16 },
    );
    // A guard against hanging, not a performance assertion.
    let guard: NodeJS.Timeout | undefined;
    await Promise.race([done, new Promise((r) => (guard = setTimeout(r, 90_000)))]);
    clearTimeout(guard);
    await subscription.close();
    assert.equal(seen.size, pastOneWindow, `received ${seen.size} of ${pastOneWindow}`);
    assert.equal(duplicates, 0);
    const left = await receiver.peekMessages(10);
    assert.equal(
      left.filter((m) => (m.body as { run?: string }).run === run).length,
      0,
      'all were completed',
    );
    await receiver.close();
  });

  it(`receiveMessages and completeMessage on one link go past one AMQP session window`, async () => {
    const run = uniqueId('pull');
    const sender = client.createSender(longLivedQueue);
    await sendMany(sender, run, pastOneWindow);
    await sender.close();

    const receiver = client.createReceiver(longLivedQueue);
    let completed = 0;
    let abandoned = 0;
    const end = Date.now() + 90_000;
    while (completed < pastOneWindow && Date.now() < end) {
      const batch = await receiver.receiveMessages(100, { maxWaitTimeInMs: 2_000 });
      for (const m of batch) {
        // Abandon one in fifty once, so redeliveries are part of the traffic too.
        if (m.deliveryCount === 0 && (m.body as { n: number }).n % 50 === 0) {
          await receiver.abandonMessage(m);
          abandoned++;
        } else {
          await receiver.completeMessage(m);
          completed++;
        }
      }
    }
    assert.equal(completed, pastOneWindow);
    assert.equal(abandoned, pastOneWindow / 50);
    assert.equal((await receiver.receiveMessages(10, { maxWaitTimeInMs: 500 })).length, 0);
    await receiver.close();
  });

  it('accepts a MessageId again once the duplicate detection window has passed', async () => {
    const sender = client.createSender(windowQueue);
    const id = uniqueId('window');
    await sender.sendMessages({ body: 'first', messageId: id });
    await sender.sendMessages({ body: 'inside the window', messageId: id });
    await sleep(22_000);
    await sender.sendMessages({ body: 'after the window', messageId: id });
    await sender.close();
    const receiver = client.createReceiver(windowQueue, { receiveMode: 'receiveAndDelete' });
    const got = await receiveAtLeast(receiver, 2);
    assert.deepEqual(
      got.map((m) => m.body),
      ['first', 'after the window'],
    );
    assert.equal((await receiver.receiveMessages(5, { maxWaitTimeInMs: 1_000 })).length, 0);
    await receiver.close();
  });
});
