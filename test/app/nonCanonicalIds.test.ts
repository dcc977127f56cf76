import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient, type ServiceBusReceivedMessage } from '@azure/service-bus';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { isOrderId } from '../../shared/domain/index.js';
import { orderIdSchema } from '../../shared/messaging/contracts.js';
import { queues } from '../../shared/messaging/entities.js';
import { StateStore } from '../../shared/stateStore/index.js';
import { Api, Collector, terminal, waitFor } from './helpers.js';

/**
 * Order ids that a UUID schema accepts but the state store refuses (upper case, the nil UUID) are
 * one rule everywhere: the message contract refuses them, so a message naming one is poison (an
 * operator alert naming the order when one can be told, then the dead-letter queue), never an
 * error the Scheduler throws ten times before the broker gives up silently. Through the local
 * host and the Service Bus emulator, as a client's mistake would arrive.
 */
describe('non-canonical order ids in messages', { concurrency: true }, () => {
  let stack: Stack;
  let api: Api;
  let bus: ServiceBusClient;
  let alerts: Collector;
  let store: StateStore;

  before(async () => {
    stack = await startStack({ ports: randomPorts });
    api = new Api(stack);
    bus = new ServiceBusClient(stack.env.ServiceBusConnection);
    alerts = new Collector(bus, queues.operatorAlerts);
    store = await StateStore.open({
      kind: 'connectionString',
      connectionString: stack.env.StateStoreConnection,
    });
  });

  after(async () => {
    await alerts?.close();
    await bus?.close();
    await stack?.stop();
  });

  const alertsNaming = (messageId: string) =>
    alerts.messages.filter((m) => String((m.body as { reason?: string }).reason).includes(messageId));

  async function send(queue: string, messageId: string, body: unknown): Promise<void> {
    const sender = bus.createSender(queue);
    try {
      await sender.sendMessages({ messageId, body });
    } finally {
      await sender.close();
    }
  }

  /**
   * The message as the poison quarantine dead-lettered it, taken off the `poison` queue's
   * dead-letter queue: on its FIRST delivery (never retried), with the reason, naming where it came
   * from; and never in the original entity's own dead-letter queue (the broker's
   * MaxDeliveryCountExceeded after ten failed deliveries is what this replaces).
   */
  async function deadLettered(queue: string, messageId: string): Promise<ServiceBusReceivedMessage> {
    const dlq = bus.createReceiver(queues.poison, { subQueueType: 'deadLetter' });
    try {
      const dead = await waitFor(
        `${messageId} from ${queue} in the poison dead-letter queue`,
        async () => {
          const got = await dlq.receiveMessages(10, { maxWaitTimeInMs: 1000 });
          const mine = got.find((m) => m.applicationProperties?.poisonMessageId === messageId);
          for (const m of got) if (m !== mine) await dlq.abandonMessage(m);
          return mine;
        },
        30_000,
      );
      await dlq.completeMessage(dead);
      assert.equal(dead.deadLetterReason, 'PoisonMessage');
      assert.match(String(dead.deadLetterErrorDescription), /orderId/);
      assert.equal(dead.applicationProperties?.poisonEntity, queue);
      assert.equal(dead.applicationProperties?.poisonDeliveryCount, 1, 'quarantined on its first delivery');
      const own = bus.createReceiver(queue, { subQueueType: 'deadLetter' });
      try {
        const there = await own.peekMessages(100);
        assert.ok(!there.some((m) => m.messageId === messageId), `not in ${queue}'s own dead-letter queue`);
      } finally {
        await own.close();
      }
      return dead;
    } finally {
      await dlq.close();
    }
  }

  it('the contract and the store agree on what an order id is', () => {
    const samples = [
      randomUUID(),
      randomUUID().toUpperCase(),
      '00000000-0000-0000-0000-000000000000',
      'ffffffff-ffff-ffff-ffff-ffffffffffff',
      '6ba7b810-9dad-11d1-80b4-00c04fd430c8',
      '6ba7b810-9dad-01d1-80b4-00c04fd430c8',
      '6ba7b810-9dad-41d1-c0b4-00c04fd430c8',
      'not-a-uuid',
    ];
    for (const s of samples) assert.equal(orderIdSchema.safeParse(s).success, isOrderId(s), s);
  });

  it('an upper-case process-order naming a real order is poison: one alert naming the order, dead-lettered, the order untouched', async () => {
    const orderId = await api.place(['SKU-1']);
    await api.until(orderId, terminal);
    const before = await store.load(orderId);
    const messageId = `upper-${orderId}`;
    await send(queues.scheduler, messageId, {
      type: 'process-order',
      orderId: orderId.toUpperCase(),
      reason: 'submitted',
    });
    const alert = await waitFor(
      'a poison alert for the upper-case id',
      () => alertsNaming(messageId)[0],
      30_000,
    );
    assert.equal(alert.subject, 'PoisonMessage');
    assert.equal((alert.body as { orderId: string }).orderId, orderId, 'the alert names the order it meant');
    assert.match(String((alert.body as { reason: string }).reason), /orderId/);
    await deadLettered(queues.scheduler, messageId);
    assert.equal(alertsNaming(messageId).length, 1, 'one alert');
    const afterwards = await store.load(orderId);
    assert.equal(
      afterwards?.state.updatedAt.getTime(),
      before?.state.updatedAt.getTime(),
      'the order is untouched',
    );
  });

  it('the nil UUID in a process-order is poison: an alert, dead-lettered, no order', async () => {
    const nil = '00000000-0000-0000-0000-000000000000';
    const messageId = `nil-${randomUUID()}`;
    await send(queues.scheduler, messageId, { type: 'process-order', orderId: nil, reason: 'submitted' });
    const alert = await waitFor('a poison alert for the nil id', () => alertsNaming(messageId)[0], 30_000);
    assert.equal(alert.subject, 'PoisonMessage');
    await deadLettered(queues.scheduler, messageId);
    assert.equal(alertsNaming(messageId).length, 1);
  });

  it('an upper-case Agent request is poison at the Agent: no remote call, no reply, an alert', async () => {
    const orderId = randomUUID();
    const messageId = `upper-request-${orderId}`;
    await send(queues.inventoryAgent, messageId, {
      type: 'agent-request',
      orderId: orderId.toUpperCase(),
      run: 1,
      step: 'inventory',
      kind: 'do',
      action: 'reserve',
      attempt: 1,
      completeBy: new Date(Date.now() + 60_000).toISOString(),
      idempotencyKey: `${orderId.toUpperCase()}:inventory:1`,
      payload: { items: [{ sku: 'SKU-1', quantity: 1 }] },
    });
    const alert = await waitFor(
      'a poison alert for the agent request',
      () => alertsNaming(messageId)[0],
      30_000,
    );
    assert.equal((alert.body as { orderId: string }).orderId, orderId);
    await deadLettered(queues.inventoryAgent, messageId);
    const calls = stack.remote.inventory
      .ledger()
      .requests.filter((r) => r.idempotencyKey?.toLowerCase().startsWith(orderId));
    assert.equal(calls.length, 0, 'the remote service was not called');
  });

  it('an upper-case Agent reply is poison at the Scheduler: an alert, dead-lettered', async () => {
    const orderId = await api.place(['SKU-1']);
    await api.until(orderId, terminal);
    const messageId = `upper-reply-${orderId}`;
    await send(queues.scheduler, messageId, {
      type: 'agent-reply',
      orderId: orderId.toUpperCase(),
      run: 1,
      step: 'inventory',
      kind: 'do',
      attempt: 1,
      outcome: 'succeeded',
    });
    const alert = await waitFor('a poison alert for the reply', () => alertsNaming(messageId)[0], 30_000);
    assert.equal((alert.body as { orderId: string }).orderId, orderId);
    await deadLettered(queues.scheduler, messageId);
    assert.equal(alertsNaming(messageId).length, 1);
  });
});
