import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ServiceBusClient, ServiceBusReceivedMessage } from '@azure/service-bus';
import { eventually, newClient, openNamespace, purge, uniqueId, type Namespace } from './harness.js';

const queues = ['conf-robust-1', 'conf-robust-2', 'conf-robust-3'];

/** The local Functions host keeps streaming receivers open on several queues while senders come and go. */
describe('many connections, streaming receivers, senders opening and closing', () => {
  let ns: Namespace;
  const clients: ServiceBusClient[] = [];

  before(async () => {
    ns = await openNamespace();
    const c = newClient(ns);
    for (const q of queues) {
      const r = c.createReceiver(q, { receiveMode: 'receiveAndDelete' });
      await purge(c, r);
      await r.close();
    }
    await c.close();
  });

  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await ns.close();
  });

  it('delivers every message exactly once across competing streaming receivers on separate connections', async () => {
    const run = uniqueId('conc');
    const perQueue = 60;
    const received = new Map<string, Map<string, number>>(queues.map((q) => [q, new Map()]));
    const receiverClients = [...Array(6).keys()].map(() => newClient(ns));
    clients.push(...receiverClients);
    const subscriptions = receiverClients.map((c, i) => {
      const q = queues[i % queues.length];
      const receiver = c.createReceiver(q);
      return receiver.subscribe(
        {
          processMessage: async (m: ServiceBusReceivedMessage) => {
            if ((m.body as { run?: string }).run !== run) return;
            const seen = received.get(q)!;
            seen.set(String(m.messageId), (seen.get(String(m.messageId)) ?? 0) + 1);
            // Some handlers take a while and renew their lock meanwhile.
            if (seen.size % 10 === 0) await receiver.renewMessageLock(m);
          },
          processError: async () => {},
        },
        { maxConcurrentCalls: 4 },
      );
    });

    // Short-lived senders, each on its own connection, opening and closing while receivers stream.
    const senders = [...Array(6).keys()].map(async (s) => {
      for (let round = 0; round < 3; round++) {
        const c = newClient(ns);
        for (const q of queues) {
          const sender = c.createSender(q);
          const from = s * 10;
          const ids = [...Array(10).keys()]
            .map((i) => from + i)
            .filter((n) => n % 3 === round)
            .map((n) => ({ body: { run, n }, messageId: `${run}-${n}` }));
          if (ids.length > 0) await sender.sendMessages(ids);
          await sender.close();
        }
        await c.close();
      }
    });
    await Promise.all(senders);

    await eventually(
      async () => ([...received.values()].every((m) => m.size >= perQueue) ? true : undefined),
      'every message on every queue',
      60_000,
    );
    await Promise.all(subscriptions.map((s) => s.close()));
    for (const q of queues) {
      const seen = received.get(q)!;
      assert.equal(seen.size, perQueue, `${q}: all distinct messages`);
      const redelivered = [...seen.values()].filter((n) => n > 1);
      assert.deepEqual(redelivered, [], `${q}: no message delivered twice`);
    }
  });
});
