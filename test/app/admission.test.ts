import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ManualClock, orderIdFromIdempotencyKey } from '../../shared/domain/index.js';
import { ServiceBusQueueBacklog } from '../../shared/messaging/backlog.js';
import { IntakeGauge } from '../../shared/messaging/intakeGauge.js';
import { queues } from '../../shared/messaging/entities.js';
import { freshDeps, held, postOrder, startInfra, type Infra, type TestDeps } from './direct.js';

/**
 * The door against the emulator: a message waits in the scheduler queue (no Scheduler runs in
 * this test), and the deps' clock is set relative to its enqueue time, so "the intake is N s
 * behind" is exact without waiting N s.
 */
describe('submission door: refuse new orders while the Scheduler intake is behind', () => {
  let infra: Infra;
  let enqueuedAt: Date;
  const limitSeconds = 10;

  before(async () => {
    infra = await startInfra();
    const sender = infra.client.createSender(queues.scheduler);
    await sender.sendMessages({
      body: { type: 'process-order', orderId: randomUUID(), reason: 'submitted' },
      messageId: randomUUID(),
    });
    await sender.close();
    const receiver = infra.client.createReceiver(queues.scheduler);
    const [head] = await receiver.peekMessages(1);
    await receiver.close();
    enqueuedAt = head.enqueuedTimeUtc!;
  });
  after(async () => {
    await infra?.stop();
  });

  async function depsAt(secondsBehind: number): Promise<TestDeps> {
    const deps = await freshDeps(infra);
    deps.clock = new ManualClock(new Date(enqueuedAt.getTime() + secondsBehind * 1000));
    deps.door = {
      limitSeconds,
      // No caching here: each submission measures (production samples every few seconds).
      intake: new IntakeGauge(new ServiceBusQueueBacklog(infra.client, queues.scheduler), 0),
    };
    return deps;
  }

  const post = (deps: TestDeps, key: string) => postOrder(deps, key);

  it('accepts while the oldest waiting message is within the limit', async () => {
    const deps = await depsAt(limitSeconds - 1);
    const res = await post(deps, randomUUID());
    assert.equal(res.status, 202);
  });

  it('refuses past the limit with 503 problem+json and Retry-After, and writes and sends nothing', async () => {
    const deps = await depsAt(limitSeconds + 25);
    const key = randomUUID();
    const res = await post(deps, key);
    assert.equal(res.status, 503);
    const headers = res.headers as Record<string, string>;
    assert.equal(headers['Content-Type'], 'application/problem+json');
    assert.equal(headers['Retry-After'], '25');
    const body = JSON.parse(String(res.body)) as { type: string; status: number; detail: string };
    assert.match(body.type, /overloaded$/);
    assert.match(body.detail, /35 s/);
    const orderId = orderIdFromIdempotencyKey(key);
    assert.equal(await deps.store.load(orderId), null);
    assert.equal((await held(infra, queues.scheduler, orderId)).length, 0);
  });

  it('still answers a repeated submission of an order it already took', async () => {
    const key = randomUUID();
    const open = await depsAt(1);
    assert.equal((await post(open, key)).status, 202);
    // Same tables, later clock: the door is closed now, but this order was accepted before.
    open.clock = new ManualClock(new Date(enqueuedAt.getTime() + (limitSeconds + 5) * 1000));
    const again = await post(open, key);
    assert.equal(again.status, 202);
    assert.equal((await post(open, randomUUID())).status, 503);
  });

  it('stays open when the backlog cannot be measured (a blind door must not become an outage)', async () => {
    const deps = await depsAt(limitSeconds + 100);
    deps.door = {
      limitSeconds,
      intake: new IntakeGauge(
        {
          oldestWaiting: () => Promise.reject(new Error('peek refused')),
        },
        0,
      ),
    };
    assert.equal((await post(deps, randomUUID())).status, 202);
  });
});
