import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { InvocationContext } from '@azure/functions';
import { handleSchedulerMessage } from '../../shared/scheduler/scheduler.js';
import { handleAgentRequest } from '../../shared/agents/agent.js';
import { orderRefusals } from '../../shared/domain/index.js';
import { PoisonMessageError } from '../../shared/messaging/poison.js';
import { queues } from '../../shared/messaging/entities.js';
import type { MessageBus } from '../../shared/messaging/bus.js';
import { poisonProperties } from '../../shared/messaging/quarantine.js';
import type { ServiceBusReceivedMessage } from '@azure/service-bus';
import { startRemoteService } from '../../local/remoteServices/index.js';
import { peekAll } from './helpers.js';
import { context, freshDeps, held, load, processOrder, startInfra, submitted, type Infra } from './direct.js';

/**
 * Poison messages (schema failures) and the Agent handler, called directly. A poison message is
 * alerted and quarantined: dead-lettered at once in `poison` with its reason, and the handler
 * returns so the host completes it. The fallback test plays the host's part with a receiver it
 * controls for a bus that cannot quarantine: receive, call the handler, abandon on throw, until
 * the broker dead-letters the message after the queue's MaxDeliveryCount (10).
 */
describe('poison messages and the Agent', () => {
  let infra: Infra;
  let inventory: Awaited<ReturnType<typeof startRemoteService>>;
  before(async () => {
    [infra, inventory] = await Promise.all([
      startInfra(),
      startRemoteService({ name: 'inventory', port: 0 }),
    ]);
  });
  after(async () => {
    await inventory?.stop();
    await infra?.stop();
  });

  /** The quarantined copy of `messageId`, taken off poison's dead-letter queue. */
  async function quarantined(messageId: string): Promise<ServiceBusReceivedMessage> {
    const dlq = infra.client.createReceiver(queues.poison, { subQueueType: 'deadLetter' });
    try {
      for (let round = 0; round < 10; round++) {
        const got = await dlq.receiveMessages(20, { maxWaitTimeInMs: 1000 });
        const mine = got.find((m) => m.applicationProperties?.[poisonProperties.messageId] === messageId);
        for (const m of got) if (m !== mine) await dlq.abandonMessage(m);
        if (mine) {
          await dlq.completeMessage(mine);
          return mine;
        }
      }
      throw new Error(`${messageId} was not quarantined`);
    } finally {
      await dlq.close();
    }
  }

  /** The same bus without the quarantine: what a poison message meets if quarantining fails. */
  const withoutQuarantine = (bus: MessageBus): MessageBus => ({
    send: (entity, messages) => bus.send(entity, messages),
    counters: bus.counters,
    close: async () => undefined,
  });

  it('an invalid scheduler body is dead-lettered at once with its reason and alerts an operator naming the order', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    const before = await load(deps, orderId);
    const bad = { type: 'process-order', orderId, reason: 'because' };
    await handleSchedulerMessage(deps, bad, context('scheduler', undefined, `bad-${orderId}`));
    const dead = await quarantined(`bad-${orderId}`);
    assert.equal(dead.deadLetterReason, 'PoisonMessage');
    assert.match(String(dead.deadLetterErrorDescription), /reason/);
    assert.deepEqual(dead.body, bad, 'the body as it arrived');
    assert.equal(dead.applicationProperties?.[poisonProperties.entity], queues.scheduler);
    const alerts = await held(infra, queues.operatorAlerts, orderId);
    assert.equal(alerts.length, 1);
    assert.equal(alerts[0].subject, 'PoisonMessage');
    assert.equal(alerts[0].body.orderId, orderId);
    assert.match(alerts[0].body.reason, new RegExp(`scheduler \\(MessageId bad-${orderId}\\)`));
    const afterwards = await load(deps, orderId);
    assert.deepEqual(afterwards.etags, before.etags, 'the order is untouched');
  });

  it('an unreadable body (not JSON) is poison too, with an alert for an unknown order', async () => {
    const deps = await freshDeps(infra);
    const messageId = `garbage-${randomUUID()}`;
    await handleSchedulerMessage(deps, Buffer.from('{not json'), context('scheduler', undefined, messageId));
    assert.equal((await quarantined(messageId)).deadLetterReason, 'PoisonMessage');
    const all = await peekAll(infra.client, queues.operatorAlerts);
    const mine = all.filter((m) => String(m.body.reason).includes(messageId));
    assert.equal(mine.length, 1);
    assert.equal(mine[0].body.orderId, 'unknown');
  });

  it('an invalid agent request is poison: alert, no remote call, no reply', async () => {
    const deps = await freshDeps(infra);
    const orderId = randomUUID();
    const bad = { type: 'agent-request', orderId, run: 1, step: 'inventory', kind: 'do', attempt: 0 };
    await handleAgentRequest(
      { bus: deps.bus, clock: deps.clock, serviceUrl: inventory.url, refusals: orderRefusals.inventory },
      queues.inventoryAgent,
      bad,
      context('inventoryAgent', undefined, `bad-agent-${orderId}`),
    );
    const dead = await quarantined(`bad-agent-${orderId}`);
    assert.equal(dead.applicationProperties?.[poisonProperties.entity], queues.inventoryAgent);
    const alerts = await held(infra, queues.operatorAlerts, orderId);
    assert.equal(alerts.length, 1);
    assert.match(alerts[0].body.reason, /agent-inventory/);
    assert.equal(inventory.ledger().requests.filter((r) => r.idempotencyKey?.startsWith(orderId)).length, 0);
    assert.equal((await held(infra, queues.scheduler, orderId)).length, 0);
  });

  it('a copy a crashed quarantine left in poison is dead-lettered by the next one', async () => {
    const deps = await freshDeps(infra);
    const orphan = `orphan-${randomUUID()}`;
    const sender = infra.client.createSender(queues.poison);
    await sender.sendMessages({
      messageId: `poison:scheduler:${orphan}`,
      body: { type: 'nonsense' },
      applicationProperties: {
        [poisonProperties.entity]: queues.scheduler,
        [poisonProperties.messageId]: orphan,
        [poisonProperties.reason]: 'left behind by a crash',
      },
    });
    await sender.close();
    const next = `next-${randomUUID()}`;
    await handleSchedulerMessage(deps, { type: 'nonsense' }, context('scheduler', undefined, next));
    const [left, mine] = [await quarantined(orphan), await quarantined(next)];
    assert.equal(left.deadLetterErrorDescription, 'left behind by a crash');
    assert.equal(mine.deadLetterReason, 'PoisonMessage');
  });

  it('when quarantining is not possible it throws PoisonMessageError, and the broker dead-letters it after MaxDeliveryCount, with one alert', async () => {
    const deps = { ...(await freshDeps(infra)), bus: withoutQuarantine(infra.bus) };
    const orderId = randomUUID();
    const messageId = `poison-${orderId}`;
    const sender = infra.client.createSender(queues.scheduler);
    await sender.sendMessages({
      messageId,
      correlationId: orderId,
      body: { type: 'agent-reply', orderId, step: 'NOT A STEP' },
    });
    await sender.close();
    const receiver = infra.client.createReceiver(queues.scheduler);
    let deliveries = 0;
    try {
      for (let round = 0; round < 40 && deliveries < 10; round++) {
        const [m] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 2000 });
        if (!m) continue;
        if (m.messageId !== messageId) {
          await receiver.abandonMessage(m);
          continue;
        }
        deliveries += 1;
        try {
          await handleSchedulerMessage(deps, m.body, context('scheduler', undefined, m.messageId as string));
          await receiver.completeMessage(m);
        } catch (e) {
          assert.ok(e instanceof PoisonMessageError, String(e));
          await receiver.abandonMessage(m);
        }
      }
    } finally {
      await receiver.close();
    }
    assert.equal(deliveries, 10);
    const dlq = infra.client.createReceiver(queues.scheduler, { subQueueType: 'deadLetter' });
    try {
      const dead = await dlq.receiveMessages(10, { maxWaitTimeInMs: 3000 });
      const mine = dead.filter((m) => m.messageId === messageId);
      assert.equal(mine.length, 1);
      assert.equal(mine[0].deliveryCount, 10);
      await dlq.completeMessage(mine[0]);
    } finally {
      await dlq.close();
    }
    const alerts = await held(infra, queues.operatorAlerts, orderId);
    assert.equal(alerts.length, 1, 'ten deliveries, one alert (duplicate detection)');
  });

  it('an agent request delivered twice calls the service once (effect) and replies once', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await handleSchedulerMessage(deps, processOrder(orderId), context('scheduler'));
    const [request] = await held(infra, queues.inventoryAgent, orderId);
    assert.ok(request);
    const agentDeps = {
      bus: deps.bus,
      clock: deps.clock,
      serviceUrl: inventory.url,
      refusals: orderRefusals.inventory,
    };
    for (let i = 0; i < 2; i++) {
      await handleAgentRequest(
        agentDeps,
        queues.inventoryAgent,
        request.body,
        context('inventoryAgent', undefined, request.messageId as string),
      );
    }
    const effects = inventory.ledger().effects.filter((e) => e.orderId === orderId);
    assert.equal(effects.length, 1);
    assert.equal(effects[0].duplicatesAbsorbed, 1);
    const replies = await held(infra, queues.scheduler, orderId);
    assert.equal(replies.length, 1, replies.map((m) => m.messageId).join(','));
    assert.equal(replies[0].body.outcome, 'succeeded');
    assert.equal(replies[0].body.attempt, 1);

    // Applying that reply twice moves the order once.
    await handleSchedulerMessage(deps, replies[0].body, context('scheduler'));
    const once = await load(deps, orderId);
    await handleSchedulerMessage(deps, replies[0].body, context('scheduler'));
    assert.deepEqual((await load(deps, orderId)).etags, once.etags);
    assert.equal(once.state.steps[0].status, 'Completed');
  });

  it('an agent request read past its complete-by is not started: no call, a not-started reply', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await handleSchedulerMessage(deps, processOrder(orderId), context('scheduler'));
    const [request] = await held(infra, queues.inventoryAgent, orderId);
    deps.clock.advanceSeconds(61);
    await handleAgentRequest(
      { bus: deps.bus, clock: deps.clock, serviceUrl: inventory.url, refusals: orderRefusals.inventory },
      queues.inventoryAgent,
      request.body,
      context('inventoryAgent'),
    );
    assert.equal(inventory.ledger().requests.filter((r) => r.idempotencyKey?.startsWith(orderId)).length, 0);
    const replies = await held(infra, queues.scheduler, orderId);
    assert.deepEqual(
      replies.map((m) => [m.messageId, m.body.outcome, m.body.attempt]),
      [[`${request.messageId}:not-started`, 'not-started', 1]],
    );
    // The Scheduler records it like a stall: the Supervisor's retry then spends no failure budget.
    await handleSchedulerMessage(deps, replies[0].body, context('scheduler'));
    const { state } = await load(deps, orderId);
    assert.equal(state.steps[0].stalledAttempt, 1);
    assert.match(state.steps[0].lastError ?? '', /not started/);
  });

  it('a redelivered request past its complete-by stays silent: an earlier delivery may have started it', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await handleSchedulerMessage(deps, processOrder(orderId), context('scheduler'));
    const [request] = await held(infra, queues.inventoryAgent, orderId);
    deps.clock.advanceSeconds(61);
    const redelivery = new InvocationContext({
      invocationId: 'redelivery',
      triggerMetadata: { deliveryCount: 2 },
    });
    await handleAgentRequest(
      { bus: deps.bus, clock: deps.clock, serviceUrl: inventory.url, refusals: orderRefusals.inventory },
      queues.inventoryAgent,
      request.body,
      redelivery,
    );
    assert.equal((await held(infra, queues.scheduler, orderId)).length, 0);
  });
});
