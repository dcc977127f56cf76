import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { HttpRequest, type HttpResponseInit } from '@azure/functions';
import { odata } from '@azure/data-tables';
import type { ServiceBusReceivedMessage } from '@azure/service-bus';
import type { z } from 'zod';
import { handleSchedulerMessage } from '../../shared/scheduler/scheduler.js';
import {
  deadLetterMessageSchema,
  deadLetterCounts,
  deadLetterMessages,
  discardDeadLetters,
  redriveDeadLetters,
} from '../../shared/http/deadLetterApi.js';
import {
  orderStatusSubscriptions,
  queues,
  topics,
  waitingQueueOf,
  waitingQueues,
} from '../../shared/messaging/entities.js';
import { poisonProperties } from '../../shared/messaging/quarantine.js';
import {
  findDeadLetterSource,
  redriveCopy,
  ServiceBusDeadLetters,
} from '../../shared/messaging/deadLetters.js';
import { rowToHistoryEntry, type HistoryEntry } from '../../shared/stateStore/historyRows.js';
import { behindPlatformAuth, principalHeaders } from '../http/principal.js';
import { documented, fromHandler } from '../api/openApiValidator.js';
import {
  context,
  freshDeps,
  held,
  load,
  processOrder,
  startInfra,
  submitted,
  type Infra,
  type TestDeps,
} from './direct.js';
import { peekAll } from './helpers.js';

type DeadLetterView = z.infer<typeof deadLetterMessageSchema>;

/**
 * The operator's dead-letter routes, called directly, against Azurite and the in-process Service
 * Bus emulator with the real SDK. This file plays the host's part where a message must fail
 * (receive, abandon, until the broker dead-letters it after MaxDeliveryCount) and where a redriven
 * message must be processed (receive the copy, call the real Scheduler handler). Every answer is
 * checked against the OpenAPI document.
 */
describe('dead letters: list, redrive, discard', () => {
  let infra: Infra;
  before(async () => {
    infra = await startInfra();
  });
  after(async () => {
    await infra?.stop();
  });

  const operatorName = 'ops@example.com';

  async function withDeadLetters(): Promise<TestDeps> {
    const deps = await freshDeps(infra);
    deps.deadLetters = new ServiceBusDeadLetters(infra.client);
    return deps;
  }

  type Handler = (
    deps: TestDeps,
    request: HttpRequest,
    ctx: ReturnType<typeof context>,
  ) => Promise<HttpResponseInit>;

  async function call(
    handler: Handler,
    deps: TestDeps,
    method: 'GET' | 'POST',
    path: string,
    options: { json?: unknown; raw?: string; headers?: Record<string, string> } = {},
  ) {
    const headers: Record<string, string> = { ...(options.headers ?? principalHeaders(operatorName)) };
    let body: string | undefined = options.raw;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['content-type'] ??= 'application/json';
    }
    const url = `http://127.0.0.1/api${path}`;
    const request = new HttpRequest({
      method,
      url,
      headers,
      query: Object.fromEntries(new URL(url).searchParams),
      ...(body !== undefined ? { body: { string: body } } : {}),
    });
    const res = await behindPlatformAuth(() => handler(deps, request, context(handler.name)));
    const observed = fromHandler(res);
    documented().assert(method, path, observed);
    return {
      status: res.status ?? 200,
      body: observed.body ? (JSON.parse(observed.body) as Record<string, unknown>) : {},
    };
  }

  /** Plays a host whose every attempt fails: abandon until the broker dead-letters the message. */
  async function failUntilDeadLettered(
    queue: string,
    messageId: string,
    attempt?: (m: ServiceBusReceivedMessage) => Promise<void>,
  ) {
    const receiver = infra.client.createReceiver(queue);
    let deliveries = 0;
    try {
      for (let round = 0; round < 60; round++) {
        const [m] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 1000 });
        if (!m) {
          if (deliveries > 0) break;
          continue;
        }
        if (m.messageId !== messageId) {
          await receiver.abandonMessage(m);
          continue;
        }
        deliveries += 1;
        await attempt?.(m).catch(() => undefined);
        await receiver.abandonMessage(m);
      }
    } finally {
      await receiver.close();
    }
    return deliveries;
  }

  async function deadLettersOf(deps: TestDeps, entity: string) {
    const res = await call(
      deadLetterMessages,
      deps,
      'GET',
      `/deadletters/messages?entity=${encodeURIComponent(entity)}&top=100`,
    );
    assert.equal(res.status, 200);
    return res.body.messages as DeadLetterView[];
  }

  async function historyOf(deps: TestDeps, orderId: string): Promise<HistoryEntry[]> {
    const out: HistoryEntry[] = [];
    const rows = deps.store.orders.listEntities({
      queryOptions: {
        filter: odata`PartitionKey eq ${orderId} and RowKey ge 'history:' and RowKey lt 'history;'`,
      },
    });
    for await (const row of rows) out.push(rowToHistoryEntry(row as Parameters<typeof rowToHistoryEntry>[0]));
    return out;
  }

  /** Sends one message and dead-letters it on the spot, as a handler that rejects it would. */
  async function deadLetter(
    queue: string,
    message: {
      messageId: string;
      correlationId?: string;
      body: unknown;
      applicationProperties?: Record<string, string>;
    },
  ) {
    const sender = infra.client.createSender(queue);
    await sender.sendMessages(message);
    await sender.close();
    const receiver = infra.client.createReceiver(queue);
    try {
      for (;;) {
        const [m] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 2000 });
        assert.ok(m, `the message ${message.messageId} arrived`);
        if (m.messageId !== message.messageId) {
          await receiver.abandonMessage(m);
          continue;
        }
        await receiver.deadLetterMessage(m, {
          deadLetterReason: 'Rejected',
          deadLetterErrorDescription: 'by the test',
        });
        return;
      }
    } finally {
      await receiver.close();
    }
  }

  it('a message the Scheduler failed ten times is listed with its reason and order, redriven with a new id, processed, and recorded', async () => {
    const deps = await withDeadLetters();
    const orderId = await submitted(deps);
    const messageId = `stuck-${orderId}`;
    const sender = infra.client.createSender(queues.scheduler);
    await sender.sendMessages({ messageId, correlationId: orderId, body: processOrder(orderId) });
    await sender.close();
    // Every attempt fails (say the state store was down for all ten); the broker dead-letters it.
    assert.equal(await failUntilDeadLettered(queues.scheduler, messageId), 10);

    const counts = await call(deadLetterCounts, deps, 'GET', '/deadletters');
    const entities = counts.body.entities as Array<{ entity: string; count: number }>;
    assert.deepEqual(
      entities.map((e) => e.entity),
      [
        ...Object.values(queues),
        ...waitingQueues,
        ...orderStatusSubscriptions.map((s) => `${topics.orderStatus}/subscriptions/${s}`),
      ],
    );
    assert.ok(entities.find((e) => e.entity === queues.scheduler)!.count >= 1);

    const listed = (await deadLettersOf(deps, queues.scheduler)).find((m) => m.messageId === messageId);
    assert.ok(listed, 'listed');
    assert.equal(listed.reason, 'MaxDeliveryCountExceeded');
    assert.equal(listed.deliveryCount, 10);
    assert.equal(listed.orderId, orderId);
    assert.ok(Date.parse(listed.enqueuedAt ?? '') > 0);
    assert.deepEqual(JSON.parse(listed.body), processOrder(orderId));
    assert.equal(listed.bodyTruncated, false);

    const redriven = await call(redriveDeadLetters, deps, 'POST', '/deadletters/redrive', {
      json: { entity: queues.scheduler, sequenceNumbers: [listed.sequenceNumber] },
    });
    assert.equal(redriven.status, 200);
    const [result] = redriven.body.results as Array<Record<string, string>>;
    assert.equal(result!.status, 'redriven');
    assert.equal(result!.orderId, orderId);
    assert.ok(result!.newMessageId && result!.newMessageId !== messageId, 'a new message id');
    assert.equal(
      (await deadLettersOf(deps, queues.scheduler)).filter((m) => m.messageId === messageId).length,
      0,
      'gone from the dead-letter queue',
    );

    // The copy is processed: the Scheduler takes the order and asks the first Agent.
    const [copy] = await held(infra, queues.scheduler, orderId);
    assert.equal(copy?.messageId, result!.newMessageId);
    assert.equal(copy.applicationProperties?.redrivenFrom, queues.scheduler);
    await handleSchedulerMessage(deps, copy.body, context('scheduler', undefined, String(copy.messageId)));
    assert.equal((await load(deps, orderId)).state.processState, 'Processing');
    assert.equal((await held(infra, queues.inventoryAgent, orderId)).length, 1);

    const history = await historyOf(deps, orderId);
    const entry = history.find((h) => h.event === 'DeadLetterRedriven');
    assert.ok(entry, JSON.stringify(history));
    assert.equal(entry.actor, 'operator');
    assert.equal(entry.by, operatorName);
    assert.equal(entry.outcome, 'redriven');
    assert.match(
      entry.error ?? '',
      new RegExp(`^scheduler #${listed.sequenceNumber}: MaxDeliveryCountExceeded`),
    );
    const drain = infra.client.createReceiver(queues.scheduler, { receiveMode: 'receiveAndDelete' });
    await drain.receiveMessages(5, { maxWaitTimeInMs: 500 }); // the copy, handled above
    await drain.close();
  });

  /** Plays the host for one delivery: the handler runs, and the message is completed if it returns. */
  async function deliverOnce(
    queue: string,
    messageId: string,
    handle: (m: ServiceBusReceivedMessage) => Promise<void>,
  ) {
    const receiver = infra.client.createReceiver(queue);
    try {
      for (;;) {
        const [m] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 2000 });
        assert.ok(m, `the message ${messageId} arrived`);
        if (m.messageId !== messageId) {
          await receiver.abandonMessage(m);
          continue;
        }
        await handle(m);
        await receiver.completeMessage(m);
        return;
      }
    } finally {
      await receiver.close();
    }
  }

  /** A poison reply naming the order, delivered once to the real Scheduler handler (quarantined). */
  async function quarantinedPoison(deps: TestDeps, orderId: string): Promise<DeadLetterView> {
    const messageId = `poison-${orderId}`;
    const sender = infra.client.createSender(queues.scheduler);
    await sender.sendMessages({
      messageId,
      correlationId: orderId,
      body: { type: 'agent-reply', orderId, step: 'NOT A STEP' },
    });
    await sender.close();
    await deliverOnce(queues.scheduler, messageId, (m) =>
      handleSchedulerMessage(deps, m.body, context('scheduler', undefined, messageId)),
    );
    const listed = (await deadLettersOf(deps, queues.poison)).find(
      (m) => m.messageId === `poison:${queues.scheduler}:${messageId}`,
    );
    assert.ok(listed, 'quarantined in poison on its first delivery');
    assert.equal(listed.reason, 'PoisonMessage');
    assert.equal(listed.origin, queues.scheduler);
    assert.equal(listed.orderId, orderId);
    assert.equal(
      (await deadLettersOf(deps, queues.scheduler)).filter((m) => m.messageId === messageId).length,
      0,
      "never in the scheduler's own dead-letter queue",
    );
    return listed;
  }

  it("a poison message the Scheduler quarantines is discarded, and the discard is in the order's history", async () => {
    const deps = await withDeadLetters();
    const orderId = await submitted(deps);
    const listed = await quarantinedPoison(deps, orderId);
    const discarded = await call(discardDeadLetters, deps, 'POST', '/deadletters/discard', {
      json: { entity: queues.poison, sequenceNumbers: [listed.sequenceNumber] },
    });
    assert.deepEqual(discarded.body.results, [
      { sequenceNumber: listed.sequenceNumber, status: 'discarded', orderId },
    ]);
    assert.equal(
      (await deadLettersOf(deps, queues.poison)).filter((m) => m.messageId === listed.messageId).length,
      0,
    );
    assert.equal((await held(infra, queues.scheduler, orderId)).length, 0, 'nothing was sent');
    const entry = (await historyOf(deps, orderId)).find((h) => h.event === 'DeadLetterDiscarded');
    assert.equal(entry?.outcome, 'discarded');
    assert.equal(entry?.by, operatorName);
  });

  it('a quarantined poison message is redriven to the queue it came from, without the quarantine marks', async () => {
    const deps = await withDeadLetters();
    const orderId = await submitted(deps);
    const listed = await quarantinedPoison(deps, orderId);
    const redriven = await call(redriveDeadLetters, deps, 'POST', '/deadletters/redrive', {
      json: { entity: queues.poison, sequenceNumbers: [listed.sequenceNumber] },
    });
    assert.equal((redriven.body.results as Array<{ status: string }>)[0]?.status, 'redriven');
    const copy = (await peekAll(infra.client, queues.scheduler)).find(
      (m) => m.applicationProperties?.redrivenMessageId === listed.messageId,
    );
    assert.ok(copy, 'the copy went back to the scheduler queue');
    assert.equal(copy.applicationProperties?.redrivenFrom, queues.poison);
    assert.equal(copy.applicationProperties?.poisonEntity, undefined);
    assert.equal(copy.applicationProperties?.poisonReason, undefined);
    assert.deepEqual(
      (await peekAll(infra.client, queues.poison)).filter((m) => String(m.messageId).includes(orderId)),
      [],
      'nothing sent to poison itself',
    );
  });

  it('a dead letter in poison that names no queue of the app is not redriven anywhere', async () => {
    const deps = await withDeadLetters();
    const orderId = await submitted(deps);
    await deadLetter(queues.poison, {
      messageId: `stray-${orderId}`,
      correlationId: orderId,
      body: { hello: 'world' },
    });
    const listed = (await deadLettersOf(deps, queues.poison)).find((m) => m.messageId === `stray-${orderId}`);
    assert.ok(listed);
    const redriven = await call(redriveDeadLetters, deps, 'POST', '/deadletters/redrive', {
      json: { entity: queues.poison, sequenceNumbers: [listed.sequenceNumber] },
    });
    const [result] = redriven.body.results as Array<{ status: string; detail?: string }>;
    assert.equal(result?.status, 'not-found');
    assert.match(String(result?.detail), /names no queue/);
    assert.ok(
      (await deadLettersOf(deps, queues.poison)).some((m) => m.messageId === `stray-${orderId}`),
      'it stays a dead letter',
    );
  });

  /** Takes the redriven copies of an order off a queue (completes them), so later tests see none. */
  async function takeCopies(queue: string, orderId: string, count: number) {
    const receiver = infra.client.createReceiver(queue);
    try {
      for (let taken = 0; taken < count;) {
        const [m] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 2000 });
        assert.ok(m, `the copy for ${orderId} is in ${queue}`);
        if (m.correlationId === orderId) {
          await receiver.completeMessage(m);
          taken += 1;
        } else await receiver.abandonMessage(m);
      }
    } finally {
      await receiver.close();
    }
  }

  it("a waiting queue's dead letter is listed and redriven to its Agent queue, not back to the waiting queue", async () => {
    const deps = await withDeadLetters();
    const orderId = await submitted(deps);
    const waiting = waitingQueueOf(queues.paymentAgent);
    const messageId = `waiting-${orderId}`;
    const sender = infra.client.createSender(waiting);
    await sender.sendMessages({ messageId, correlationId: orderId, body: { orderId, step: 'payment' } });
    await sender.close();
    // Every Agent that pulled it failed before completing it: the broker dead-letters it.
    assert.equal(await failUntilDeadLettered(waiting, messageId), 10);
    const listed = (await deadLettersOf(deps, waiting)).find((m) => m.messageId === messageId);
    assert.ok(listed, 'listed under the waiting queue');
    assert.equal(listed.reason, 'MaxDeliveryCountExceeded');
    assert.equal(listed.orderId, orderId);

    const redriven = await call(redriveDeadLetters, deps, 'POST', '/deadletters/redrive', {
      json: { entity: waiting, sequenceNumbers: [listed.sequenceNumber] },
    });
    const [result] = redriven.body.results as Array<Record<string, string>>;
    assert.equal(result?.status, 'redriven', JSON.stringify(redriven.body));
    const [copy] = await held(infra, queues.paymentAgent, orderId);
    assert.ok(copy, 'the copy went to the Agent queue, whose trigger takes it at once');
    assert.equal(copy.messageId, result!.newMessageId);
    assert.equal(copy.applicationProperties?.redrivenFrom, waiting);
    assert.deepEqual(copy.body, { orderId, step: 'payment' });
    assert.deepEqual(await held(infra, waiting, orderId), [], 'nothing went back to the waiting queue');
    assert.equal((await deadLettersOf(deps, waiting)).filter((m) => m.messageId === messageId).length, 0);
    await takeCopies(queues.paymentAgent, orderId, 1);
  });

  it('a quarantined message that arrived on a waiting queue is redriven to its Agent queue', async () => {
    const deps = await withDeadLetters();
    const orderId = await submitted(deps);
    const waiting = waitingQueueOf(queues.shippingAgent);
    const messageId = `poison:${waiting}:${orderId}`;
    await deadLetter(queues.poison, {
      messageId,
      correlationId: orderId,
      body: { orderId },
      applicationProperties: { [poisonProperties.entity]: waiting },
    });
    const listed = (await deadLettersOf(deps, queues.poison)).find((m) => m.messageId === messageId);
    assert.ok(listed);
    assert.equal(listed.origin, waiting);
    const redriven = await call(redriveDeadLetters, deps, 'POST', '/deadletters/redrive', {
      json: { entity: queues.poison, sequenceNumbers: [listed.sequenceNumber] },
    });
    const [result] = redriven.body.results as Array<Record<string, string>>;
    assert.equal(result?.status, 'redriven', JSON.stringify(redriven.body));
    assert.equal((await held(infra, queues.shippingAgent, orderId)).length, 1, 'in the Agent queue');
    assert.deepEqual(await held(infra, waiting, orderId), [], 'not in the waiting queue');
    await takeCopies(queues.shippingAgent, orderId, 1);
  });

  it('refuses bad input with problem+json: unknown entity, too many or malformed sequence numbers, bad top', async () => {
    const deps = await withDeadLetters();
    assert.equal(
      (await call(deadLetterMessages, deps, 'GET', '/deadletters/messages?entity=nope')).status,
      400,
    );
    assert.equal((await call(deadLetterMessages, deps, 'GET', '/deadletters/messages')).status, 400);
    assert.equal(
      (await call(deadLetterMessages, deps, 'GET', `/deadletters/messages?entity=${queues.scheduler}&top=0`))
        .status,
      400,
    );
    assert.equal(
      (
        await call(
          deadLetterMessages,
          deps,
          'GET',
          `/deadletters/messages?entity=${queues.scheduler}&top=101`,
        )
      ).status,
      400,
    );
    for (const handler of [redriveDeadLetters, discardDeadLetters]) {
      const path = handler === redriveDeadLetters ? '/deadletters/redrive' : '/deadletters/discard';
      const bad = [
        { entity: 'order-status', sequenceNumbers: ['1'] }, // the topic itself has no dead letters
        { entity: queues.scheduler, sequenceNumbers: [] },
        { entity: queues.scheduler, sequenceNumbers: Array.from({ length: 101 }, (_, i) => String(i + 1)) },
        { entity: queues.scheduler, sequenceNumbers: ['12a'] },
        { entity: queues.scheduler, sequenceNumbers: [7] },
        { entity: queues.scheduler, sequenceNumbers: ['9999999999999999999'] }, // past 64 bits
        { entity: queues.scheduler, sequenceNumbers: ['1'], extra: true },
      ];
      for (const json of bad) {
        const res = await call(handler, deps, 'POST', path, { json });
        assert.equal(res.status, 400, JSON.stringify(json));
        assert.ok(Array.isArray(res.body.errors) && res.body.errors.length > 0);
      }
      assert.equal(
        (
          await call(handler, deps, 'POST', path, {
            raw: '{',
            headers: { ...principalHeaders(), 'content-type': 'application/json' },
          })
        ).status,
        400,
      );
      assert.equal(
        (
          await call(handler, deps, 'POST', path, {
            raw: 'x',
            headers: { ...principalHeaders(), 'content-type': 'text/plain' },
          })
        ).status,
        415,
      );
    }
  });

  it('needs an operator: 401 without a sign-in, 403 for a function key or a user without the role', async () => {
    const deps = await withDeadLetters();
    for (const headers of [{}, { 'x-functions-key': 'k' }, principalHeaders('someone', [])]) {
      const res = await call(deadLetterCounts, deps, 'GET', '/deadletters', { headers });
      assert.equal(
        res.status,
        'x-functions-key' in headers || 'x-ms-client-principal' in headers ? 403 : 401,
      );
      const post = await call(redriveDeadLetters, deps, 'POST', '/deadletters/redrive', {
        headers,
        json: { entity: queues.scheduler, sequenceNumbers: ['1'] },
      });
      assert.equal(post.status, res.status);
    }
  });

  it('an unknown sequence number, or one from another entity, is not-found and changes nothing', async () => {
    const deps = await withDeadLetters();
    const orderId = randomUUID();
    await deadLetter(queues.shippingAgent, {
      messageId: `ship-${orderId}`,
      correlationId: orderId,
      body: { orderId },
    });
    const [mine] = (await deadLettersOf(deps, queues.shippingAgent)).filter((m) => m.orderId === orderId);
    assert.ok(mine);
    const res = await call(redriveDeadLetters, deps, 'POST', '/deadletters/redrive', {
      json: { entity: queues.shippingAgent, sequenceNumbers: ['987654321'] },
    });
    assert.equal((res.body.results as Array<{ status: string }>)[0]!.status, 'not-found');
    const elsewhere = await call(discardDeadLetters, deps, 'POST', '/deadletters/discard', {
      json: { entity: queues.paymentAgent, sequenceNumbers: [mine.sequenceNumber] },
    });
    assert.equal((elsewhere.body.results as Array<{ status: string }>)[0]!.status, 'not-found');
    assert.equal(
      (await deadLettersOf(deps, queues.shippingAgent)).filter((m) => m.orderId === orderId).length,
      1,
    );
    assert.equal((await held(infra, queues.shippingAgent, orderId)).length, 0);
  });

  it('two operators redriving the same dead letter at once send one copy', async () => {
    const deps = await withDeadLetters();
    const orderId = randomUUID();
    await deadLetter(queues.paymentAgent, {
      messageId: `pay-${orderId}`,
      correlationId: orderId,
      body: { orderId },
    });
    const [mine] = (await deadLettersOf(deps, queues.paymentAgent)).filter((m) => m.orderId === orderId);
    assert.ok(mine);
    const redrive = () =>
      call(redriveDeadLetters, deps, 'POST', '/deadletters/redrive', {
        json: { entity: queues.paymentAgent, sequenceNumbers: [mine.sequenceNumber] },
      });
    const answers = await Promise.all([redrive(), redrive()]);
    const statuses = answers.map((a) => (a.body.results as Array<{ status: string }>)[0]!.status).sort();
    assert.deepEqual(statuses, ['not-found', 'redriven']);
    assert.equal((await held(infra, queues.paymentAgent, orderId)).length, 1, 'one copy');
  });

  it('a crash between sending the copy and removing the dead letter: the next redrive is absorbed', async () => {
    const deps = await withDeadLetters();
    const orderId = randomUUID();
    await deadLetter(queues.inventoryAgent, {
      messageId: `inv-${orderId}`,
      correlationId: orderId,
      body: { orderId },
    });
    const source = findDeadLetterSource(queues.inventoryAgent)!;
    // The crashed process got as far as sending its copy.
    const dlq = infra.client.createReceiver(queues.inventoryAgent, { subQueueType: 'deadLetter' });
    const peeked = (await dlq.peekMessages(100)).find((m) => m.correlationId === orderId)!;
    await dlq.close();
    const sender = infra.client.createSender(queues.inventoryAgent);
    await sender.sendMessages(redriveCopy(source, peeked));
    await sender.close();
    const [mine] = (await deadLettersOf(deps, queues.inventoryAgent)).filter((m) => m.orderId === orderId);
    const res = await call(redriveDeadLetters, deps, 'POST', '/deadletters/redrive', {
      json: { entity: queues.inventoryAgent, sequenceNumbers: [mine!.sequenceNumber] },
    });
    assert.equal((res.body.results as Array<{ status: string }>)[0]!.status, 'redriven');
    assert.equal(
      (await held(infra, queues.inventoryAgent, orderId)).length,
      1,
      'duplicate detection absorbed the second copy',
    );
  });

  it("redrives a subscription's dead letter to the topic, marked for that subscription", async () => {
    const deps = await withDeadLetters();
    const orderId = randomUUID();
    const [subscription] = orderStatusSubscriptions;
    const entity = `${topics.orderStatus}/subscriptions/${subscription}`;
    const sender = infra.client.createSender(topics.orderStatus);
    await sender.sendMessages({
      messageId: `status-${orderId}`,
      correlationId: orderId,
      body: { orderId, event: 'OrderProcessed' },
    });
    await sender.close();
    const receiver = infra.client.createReceiver(topics.orderStatus, subscription);
    const [m] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 3000 });
    assert.equal(m?.correlationId, orderId);
    await receiver.deadLetterMessage(m, {
      deadLetterReason: 'ClientRejected',
      deadLetterErrorDescription: 'unknown event',
    });
    const [listed] = (await deadLettersOf(deps, entity)).filter((x) => x.orderId === orderId);
    assert.equal(listed?.reason, 'ClientRejected');
    assert.equal(listed.description, 'unknown event');
    const res = await call(redriveDeadLetters, deps, 'POST', '/deadletters/redrive', {
      json: { entity, sequenceNumbers: [listed.sequenceNumber] },
    });
    const [result] = res.body.results as Array<Record<string, string>>;
    assert.equal(result!.status, 'redriven');
    const [copy] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 3000 });
    assert.equal(copy?.messageId, result!.newMessageId);
    assert.equal(copy.applicationProperties?.redrivenFor, subscription);
    assert.equal(
      copy.applicationProperties?.DeadLetterReason,
      undefined,
      'the copy carries no dead-letter reason',
    );
    await receiver.completeMessage(copy);
    await receiver.close();
  });
});
