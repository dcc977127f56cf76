import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ServiceBusClient } from '@azure/service-bus';
import Long from 'long';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../../emulators/servicebus/index.js';
import { queues } from '../../shared/messaging/entities.js';
import { schedulerIntakeGauge } from '../../shared/messaging/intakeGauge.js';
import { repoRoot } from '../app/direct.js';

/**
 * The submission door's gauge of the scheduler queue, as the app builds it, against the emulator.
 * On Service Bus Standard every peeked message costs a credit, so what the emulator counts at its
 * end (peek requests, messages returned) is what the gauge costs; its figure must stay the enqueue
 * time of the oldest message still waiting.
 */
describe('intake gauge: the oldest waiting message for one peeked message', () => {
  async function withQueue(
    run: (client: ServiceBusClient, peeks: () => { peeks: number; peeked: number }) => Promise<void>,
  ): Promise<void> {
    let emulator: ServiceBusEmulator | undefined;
    let client: ServiceBusClient | undefined;
    try {
      emulator = await startServiceBusEmulator({
        config: join(repoRoot, 'infra', 'servicebus-emulator', 'Config.json'),
        port: 0,
      });
      client = new ServiceBusClient(emulator.connectionString);
      const e = emulator;
      await run(client, () => {
        const q = e.counters().entities.find((x) => x.path === queues.scheduler)!;
        return { peeks: q.peeks, peeked: q.peeked };
      });
    } finally {
      await client?.close();
      await emulator?.stop();
    }
  }

  const message = () => ({
    body: { type: 'process-order', orderId: randomUUID(), reason: 'submitted' },
    messageId: randomUUID(),
  });

  /** Every message in the queue, peeked by the test (before the gauge's peeks are counted). */
  async function everything(client: ServiceBusClient) {
    const receiver = client.createReceiver(queues.scheduler);
    try {
      return await receiver.peekMessages(1000, { fromSequenceNumber: Long.ZERO });
    } finally {
      await receiver.close();
    }
  }

  async function measured(client: ServiceBusClient, peeks: () => { peeks: number; peeked: number }) {
    const before = peeks();
    const reading = await schedulerIntakeGauge(client, 0).read();
    const after = peeks();
    return { reading, peeks: after.peeks - before.peeks, peeked: after.peeked - before.peeked };
  }

  it('a backlog headed by an active message: its enqueue time, for one peek of one message', async () => {
    await withQueue(async (client, peeks) => {
      const sender = client.createSender(queues.scheduler);
      for (let i = 0; i < 5; i++) await sender.sendMessages(message());
      await sender.close();
      const all = await everything(client);
      assert.equal(all.length, 5);
      const { reading, peeks: calls, peeked } = await measured(client, peeks);
      assert.deepEqual(reading, { known: true, oldestWaitingSince: all[0].enqueuedTimeUtc });
      assert.equal(calls, 1, 'one peek request');
      assert.ok(peeked <= 1, `one peek fetched ${peeked} messages (each a credit on Standard)`);
    });
  });

  it('an empty queue: nothing waits, one peek that returns nothing', async () => {
    await withQueue(async (client, peeks) => {
      const { reading, peeks: calls, peeked } = await measured(client, peeks);
      assert.deepEqual(reading, { known: true, oldestWaitingSince: undefined });
      assert.equal(calls, 1);
      assert.equal(peeked, 0);
    });
  });

  it('a message being handled (locked) still counts as waiting', async () => {
    await withQueue(async (client, peeks) => {
      const sender = client.createSender(queues.scheduler);
      await sender.sendMessages(message());
      await sender.sendMessages(message());
      await sender.close();
      const receiver = client.createReceiver(queues.scheduler);
      try {
        const [locked] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 5_000 });
        const { reading, peeked } = await measured(client, peeks);
        assert.deepEqual(reading, { known: true, oldestWaitingSince: locked.enqueuedTimeUtc });
        assert.ok(peeked <= 1, `one peek fetched ${peeked} messages`);
      } finally {
        await receiver.close();
      }
    });
  });

  it('a scheduled message at the head is looked past: the oldest active one behind it is reported', async () => {
    await withQueue(async (client, peeks) => {
      const sender = client.createSender(queues.scheduler);
      await sender.scheduleMessages(message(), new Date(Date.now() + 3_600_000));
      await sender.sendMessages(message());
      await sender.sendMessages(message());
      await sender.close();
      const active = (await everything(client)).filter((m) => m.state === 'active');
      assert.equal(active.length, 2);
      const { reading } = await measured(client, peeks);
      assert.deepEqual(reading, { known: true, oldestWaitingSince: active[0].enqueuedTimeUtc });
    });
  });

  it('a head that was scheduled and is due now: the older message behind it is reported', async () => {
    await withQueue(async (client, peeks) => {
      const sender = client.createSender(queues.scheduler);
      // Its sequence number comes first; its enqueue time is when it became due, after the next's.
      const due = new Date(Date.now() + 1_000);
      await sender.scheduleMessages(message(), due);
      await sender.sendMessages(message());
      await sender.close();
      await sleep(due.getTime() - Date.now() + 500);
      const all = await everything(client);
      assert.equal(all.length, 2);
      // Service Bus goes on reporting a once-scheduled message as scheduled when it is due.
      assert.equal(all[0].state, 'scheduled');
      assert.ok(all[0].enqueuedTimeUtc! > all[1].enqueuedTimeUtc!, 'the head is the younger message');
      const { reading } = await measured(client, peeks);
      assert.deepEqual(reading, { known: true, oldestWaitingSince: all[1].enqueuedTimeUtc });
    });
  });
});
