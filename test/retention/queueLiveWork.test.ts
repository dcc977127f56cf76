import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ServiceBusClient } from '@azure/service-bus';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../../emulators/servicebus/index.js';
import { queues, waitingQueueOf, waitingQueues } from '../../shared/messaging/entities.js';
import { liveQueues, serviceBusLiveWork } from '../../shared/retention/liveWork.js';
import { repoRoot } from '../app/direct.js';

/**
 * Issue 24, item 8: the live-work signal the purge gives way to on other instances' orders, the
 * heads of the queues live orders pass through (the Scheduler's and each Agent's), against the
 * Service Bus emulator over AMQP. A message waiting or being handled in any of them: live; all
 * empty: not. Each queue's reading is kept one second per queue (4 s for four queues), so the
 * purge peeks about once a second.
 */
let emulator: ServiceBusEmulator;
let client: ServiceBusClient;

before(async () => {
  emulator = await startServiceBusEmulator({
    config: join(repoRoot, 'infra', 'servicebus-emulator', 'Config.json'),
    port: 0,
  });
  client = new ServiceBusClient(emulator.connectionString);
});
after(async () => {
  await client?.close();
  await emulator?.stop();
});

const message = () => ({
  body: { type: 'process-order', orderId: randomUUID(), reason: 'submitted' },
  messageId: randomUUID(),
});

async function send(queue: string): Promise<void> {
  const sender = client.createSender(queue);
  try {
    await sender.sendMessages(message());
  } finally {
    await sender.close();
  }
}

/** Takes every message off a queue (completes them): nothing waits there any more. */
async function drain(queue: string): Promise<void> {
  const receiver = client.createReceiver(queue);
  try {
    for (;;) {
      const got = await receiver.receiveMessages(10, { maxWaitTimeInMs: 500 });
      if (got.length === 0) return;
      for (const m of got) await receiver.completeMessage(m);
    }
  } finally {
    await receiver.close();
  }
}

/** Polls the signal until it says `want`; the milliseconds it took. */
async function until(signal: { busy(): Promise<boolean> }, want: boolean, limitMs: number): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < limitMs) {
    if ((await signal.busy()) === want) return performance.now() - started;
    await sleep(100);
  }
  assert.fail(`the signal did not say ${want ? 'live' : 'quiet'} within ${limitMs} ms`);
}

test('the queues live orders pass through: the scheduler queue, every agent queue and every waiting queue', () => {
  const names = liveQueues();
  assert.ok(names.includes(queues.scheduler));
  assert.ok(names.includes(queues.paymentAgent));
  // A request waiting for a limited service's slot is a live order too (issue 26).
  assert.ok(names.includes(waitingQueueOf(queues.paymentAgent)));
  assert.ok(!names.includes(queues.operatorAlerts) && !names.includes(queues.poison));
  assert.equal(names.length, 4 + waitingQueues.length);
});

/** How long a reading is kept: one second per queue watched. */
const keptMs = liveQueues().length * 1000;

/** The signal turns to `busy` once the reading taken at `readAt` ages out: kept one second per queue. */
async function turnsAfterKeptReading(
  signal: { busy(): Promise<boolean> },
  busy: boolean,
  readAt: number,
): Promise<void> {
  await until(signal, busy, keptMs + 4000);
  const after = performance.now() - readAt;
  assert.ok(
    after >= keptMs - 100 && after < keptMs + 2500,
    `${busy ? 'live' : 'quiet again'} ${after.toFixed(0)} ms after the last reading: it is kept ${keptMs} ms`,
  );
}

test('empty queues: not live', async () => {
  assert.equal(await serviceBusLiveWork(client).busy(), false);
});

test('a message waiting in the scheduler queue: live; taken off: quiet again once the reading ages out', async () => {
  const signal = serviceBusLiveWork(client);
  await send(queues.scheduler);
  const readAt = performance.now();
  assert.equal(await signal.busy(), true);
  await drain(queues.scheduler);
  // The reading is kept one second per queue: the purge still gives way meanwhile.
  assert.equal(await signal.busy(), true, 'the kept reading');
  await turnsAfterKeptReading(signal, false, readAt);
});

test('a message waiting in an agent queue (an order between its steps elsewhere): live', async () => {
  const signal = serviceBusLiveWork(client);
  const readAt = performance.now();
  assert.equal(await signal.busy(), false);
  await send(queues.inventoryAgent);
  // Read quiet a moment ago: the kept reading answers until it ages out, then the message shows.
  assert.equal(await signal.busy(), false, 'the kept reading');
  await turnsAfterKeptReading(signal, true, readAt);
  await drain(queues.inventoryAgent);
});

test('a message being handled (locked by a receiver) still counts as live', async () => {
  await send(queues.shippingAgent);
  const receiver = client.createReceiver(queues.shippingAgent);
  try {
    const [locked] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 5000 });
    assert.ok(locked, 'a message received and locked');
    assert.equal(await serviceBusLiveWork(client).busy(), true);
    await receiver.completeMessage(locked);
  } finally {
    await receiver.close();
  }
  assert.equal(await serviceBusLiveWork(client).busy(), false, 'completed: nothing waits');
});
