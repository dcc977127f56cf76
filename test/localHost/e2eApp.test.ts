import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient, type ServiceBusReceivedMessage } from '@azure/service-bus';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../../emulators/servicebus/index.js';
import { startLocalHost, type LocalHost } from '../../local/host/index.js';
import { emulatorConfig } from './emulatorEntities.js';
import { observations, type Observation } from './fixtures/app/observations.js';
import { waitFor, writeFixtureApp } from './fixtureApp.js';

/**
 * An app shaped like Microsoft's Node e2e suite's (Azure/azure-functions-nodejs-e2e-tests): HTTP,
 * timers, Service Bus single and batch triggers, and functions whose triggers or bindings the
 * local host cannot run (Cosmos DB, SQL, Storage queue, table and blob), some disabled. The host
 * must start it, say what it does not run and why, and run the rest.
 */
describe('local host: an app with functions it cannot run, and batch Service Bus triggers', () => {
  let emulator: ServiceBusEmulator;
  let host: LocalHost;
  let client: ServiceBusClient;
  const lines: string[] = [];

  const notRun = {
    e2eHttpCosmosOutput: /output binding "[^"]+" of type "cosmosDB"/,
    e2eHttpSqlOutput: /output binding "[^"]+" of type "sql"/,
    e2eHttpStorageQueueOutput: /output binding "[^"]+" of type "queue"/,
    e2eHttpTableOutput: /output binding "[^"]+" of type "table"/,
    e2eHttpCosmosInput: /input binding "[^"]+" of type "cosmosDB"/,
    e2eCosmosTrigger: /trigger type "cosmosDBTrigger"/,
    e2eCosmosTriggerAndOutput: /trigger type "cosmosDBTrigger"/,
    e2eSqlTrigger: /trigger type "sqlTrigger"/,
    e2eStorageQueueTrigger: /trigger type "queueTrigger"/,
    e2eStorageQueueTriggerAndOutput: /trigger type "queueTrigger"/,
    e2eBlobTrigger: /trigger type "blobTrigger"/,
    e2eBlobTriggerAndOutput: /trigger type "blobTrigger"/,
    e2eServiceBusSessionTrigger: /session-enabled/,
    e2eServiceBusToTable: /output binding "[^"]+" of type "table"/,
  };

  before(async () => {
    emulator = await startServiceBusEmulator({
      config: emulatorConfig({
        queues: [
          'e2e-queue',
          'e2e-queue-many',
          'e2e-queue-many-in',
          'e2e-queue-many-out',
          'e2e-queue-many-fails',
          'e2e-queue-many-disabled',
          'e2e-queue-many-manual',
          'e2e-queue-many-slow',
          'e2e-sb-out',
          'e2e-sessions',
          'e2e-sb-to-table',
        ],
        topics: { 'e2e-topic': ['single', 'many'] },
      }),
      port: 0,
    });
    host = await startLocalHost({
      appRoot: writeFixtureApp({
        files: 'e2eApp*.js',
        hostJson: { version: '2.0', extensions: { serviceBus: { maxMessageBatchSize: 3 } } },
      }),
      httpPort: 0,
      env: {
        ServiceBusConnection: emulator.connectionString,
        'AzureWebJobs.e2eCosmosTriggerDisabled.Disabled': 'true',
        'AzureWebJobs.e2eHttpTableInputDisabled.Disabled': 'true',
        'AzureWebJobs.e2eQueueManyDisabled.Disabled': '1',
      },
      log: (line) => lines.push(line),
      shutdownGraceMs: 5_000,
    });
    client = new ServiceBusClient(emulator.connectionString);
  });

  after(async () => {
    await host?.stop();
    await client?.close();
    await emulator?.stop();
  });

  const runs = (name: string): Observation[] => observations.filter((o) => o.functionName === name);

  async function send(entity: string, ids: string[]): Promise<void> {
    const sender = client.createSender(entity);
    try {
      await sender.sendMessages(
        ids.map((id) => ({ body: { id }, messageId: id, applicationProperties: { n: id } })),
      );
    } finally {
      await sender.close();
    }
  }

  /** Peeks what an entity holds (once per entity and test: see the note on peeking below). */
  async function peek(
    entity: string,
    subscription?: string,
    deadLetter = false,
  ): Promise<ServiceBusReceivedMessage[]> {
    const options = deadLetter ? { subQueueType: 'deadLetter' as const } : {};
    const receiver = subscription
      ? client.createReceiver(entity, subscription, options)
      : client.createReceiver(entity, options);
    try {
      return await receiver.peekMessages(100);
    } finally {
      await receiver.close();
    }
  }

  it('starts, and lists each function it does not run with its reason, in one log line each', () => {
    for (const [name, reason] of Object.entries(notRun)) {
      const fn = host.functions.find((f) => f.name === name);
      assert.ok(fn, `${name} is listed`);
      assert.match(fn.notRun ?? '', reason, name);
      const logged = lines.filter((l) => l.includes(`] ${name}:`) && l.includes('not run'));
      assert.equal(logged.length, 1, `one line for ${name}: ${logged.join(' | ')}`);
      assert.match(logged[0], reason);
    }
    const disabled = host.functions.filter((f) => f.disabled).map((f) => f.name);
    assert.deepEqual(disabled, [
      'e2eCosmosTriggerDisabled',
      'e2eHttpTableInputDisabled',
      'e2eQueueManyDisabled',
    ]);
    const running = host.functions.filter((f) => !f.disabled && !f.notRun).map((f) => f.name);
    assert.deepEqual(running, [
      'e2eHello',
      'e2eHttpServiceBusOutput',
      'e2eQueueManyFails',
      'e2eQueueManyNoAutoComplete',
      'e2eQueueManySlow',
      'e2eQueueManyTrigger',
      'e2eQueueManyTriggerAndOutput',
      'e2eQueueTrigger',
      'e2eTimer',
      'e2eTimerWithRetry',
      'e2eTopicManyTrigger',
      'e2eTopicTrigger',
    ]);
  });

  it('answers 501 problem+json naming the function and the reason for an HTTP function it does not run', async () => {
    const res = await fetch(`${host.baseUrl}/e2eHttpCosmosOutput`, { method: 'POST', body: '{}' });
    assert.equal(res.status, 501);
    assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.status, 501);
    assert.equal(body.function, 'e2eHttpCosmosOutput');
    assert.match(String(body.detail), /e2eHttpCosmosOutput/);
    assert.match(String(body.detail), /cosmosDB/);
    // Its route template still routes; keys still apply first.
    assert.equal((await fetch(`${host.baseUrl}/items/42`)).status, 501);
    assert.equal(
      (await fetch(`${host.baseUrl}/e2eHttpTableOutput`, { method: 'POST', body: '{}' })).status,
      401,
    );
    const keyed = await fetch(`${host.baseUrl}/e2eHttpTableOutput`, {
      method: 'POST',
      body: '{}',
      headers: { 'x-functions-key': host.functionKey },
    });
    assert.equal(keyed.status, 501);
    // A disabled one is still 404, as in Azure.
    assert.equal((await fetch(`${host.baseUrl}/e2eHttpTableInputDisabled`)).status, 404);
    assert.ok(!lines.some((l) => l.includes("Executing 'Functions.e2eHttp")));
  });

  it('runs the functions it supports: HTTP, Service Bus output, single triggers and timers', async () => {
    assert.equal(await (await fetch(`${host.baseUrl}/e2eHello?name=e2e`)).text(), 'Hello, e2e');
    const res = await fetch(`${host.baseUrl}/e2eHttpServiceBusOutput`, {
      method: 'POST',
      body: 'to the bus',
    });
    assert.equal(res.status, 201);
    await send('e2e-queue', ['single-1']);
    const topic = client.createSender('e2e-topic');
    await topic.sendMessages({ body: { id: 'topic-1' }, messageId: 'topic-1' });
    await topic.close();
    await waitFor('the single queue trigger', () => runs('e2eQueueTrigger').length >= 1);
    await waitFor('the single topic trigger', () => runs('e2eTopicTrigger').length >= 1);
    await waitFor('the timer', () => runs('e2eTimer').length >= 1);
    assert.deepEqual(runs('e2eQueueTrigger')[0].input, { id: 'single-1' });
    const out = await peek('e2e-sb-out');
    assert.equal(out.length, 1);
  });

  it('hands a batch trigger an array of at most maxMessageBatchSize messages with the batch metadata arrays, and completes them', async () => {
    const ids = ['b-1', 'b-2', 'b-3', 'b-4', 'b-5', 'b-6', 'b-7'];
    await send('e2e-queue-many', ids);
    await waitFor(
      'all 7 messages in batches',
      () => runs('e2eQueueManyTrigger').reduce((n, o) => n + (o.input as unknown[]).length, 0) >= ids.length,
    );
    const batches = runs('e2eQueueManyTrigger');
    for (const batch of batches) {
      const messages = batch.input as { id: string }[];
      assert.ok(Array.isArray(messages), 'the handler gets an array');
      assert.ok(
        messages.length >= 1 && messages.length <= 3,
        `batch of ${messages.length} within maxMessageBatchSize 3`,
      );
      const meta = batch.triggerMetadata as Record<string, unknown[]>;
      assert.deepEqual(
        meta.messageIdArray,
        messages.map((m) => m.id),
      );
      assert.deepEqual(
        meta.deliveryCountArray,
        messages.map(() => 1),
      );
      assert.equal(meta.sequenceNumberArray.length, messages.length);
      assert.equal(meta.lockTokenArray.length, messages.length);
      assert.equal(meta.enqueuedTimeUtcArray.length, messages.length);
      assert.deepEqual(
        meta.applicationPropertiesArray,
        messages.map((m) => ({ n: m.id })),
      );
    }
    assert.ok(
      batches.some((b) => (b.input as unknown[]).length > 1),
      'at least one batch holds several messages',
    );
    assert.deepEqual(batches.flatMap((b) => (b.input as { id: string }[]).map((m) => m.id)).sort(), ids);
    // Completed: nothing left, nothing dead-lettered, nothing redelivered after the 5 s lock.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    assert.deepEqual(await peek('e2e-queue-many'), []);
    assert.deepEqual(await peek('e2e-queue-many', undefined, true), []);
    assert.equal(
      runs('e2eQueueManyTrigger').reduce((n, o) => n + (o.input as unknown[]).length, 0),
      ids.length,
    );
  });

  it("runs a batch trigger on a topic subscription, and sends a batch function's returned array as one message per element", async () => {
    const topic = client.createSender('e2e-topic');
    await topic.sendMessages([
      { body: { id: 't-1' }, messageId: 't-1' },
      { body: { id: 't-2' }, messageId: 't-2' },
    ]);
    await topic.close();
    await waitFor(
      'the topic batch',
      () => runs('e2eTopicManyTrigger').reduce((n, o) => n + (o.input as unknown[]).length, 0) >= 2,
    );
    assert.ok(runs('e2eTopicManyTrigger').every((o) => Array.isArray(o.input)));
    await send('e2e-queue-many-in', ['f-1', 'f-2']);
    // The SDK continues each peek of an entity after the last message it peeked there, so collect.
    const forwarded: { forwarded: { id: string } }[] = [];
    await waitFor('the forwarded batch', async () => {
      for (const m of await peek('e2e-queue-many-out')) forwarded.push(m.body as (typeof forwarded)[number]);
      return forwarded.length >= 2 ? true : undefined;
    });
    assert.deepEqual(forwarded.map((b) => b.forwarded.id).sort(), ['f-1', 'f-2']);
    assert.deepEqual(await peek('e2e-topic', 'many'), []);
  });

  it('abandons the whole batch when the handler throws: the delivery count rises', async () => {
    await send('e2e-queue-many-fails', ['x-1', 'x-2']);
    const seen = await waitFor('the batch delivered a second time', () => {
      const counts = runs('e2eQueueManyFails').flatMap(
        (o) => (o.triggerMetadata as { deliveryCountArray: number[] }).deliveryCountArray,
      );
      return counts.filter((c) => c === 2).length >= 2 ? counts : undefined;
    });
    assert.equal(seen.filter((c) => c === 1).length, 2, 'each message first seen with delivery count 1');
    assert.ok(!lines.some((l) => l.includes('Could not abandon')), 'abandoned cleanly');
  });

  it('keeps the locks of a batch whose function outlasts them, then completes it', async () => {
    await send('e2e-queue-many-slow', ['s-1', 's-2']);
    await waitFor('the slow batch', () => runs('e2eQueueManySlow').length >= 1 || undefined, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.deepEqual(
      runs('e2eQueueManySlow').flatMap(
        (o) => (o.triggerMetadata as { deliveryCountArray: number[] }).deliveryCountArray,
      ),
      [1, 1],
      'delivered once, in one batch',
    );
    assert.deepEqual(await peek('e2e-queue-many-slow'), []);
    assert.deepEqual(await peek('e2e-queue-many-slow', undefined, true), []);
    assert.ok(!lines.some((l) => l.includes('e2eQueueManySlow') && /Could not (renew|complete)/.test(l)));
  });

  it('leaves a batch unsettled with autoCompleteMessages false: it comes back when its lock expires', async () => {
    await send('e2e-queue-many-manual', ['m-1']);
    const counts = await waitFor('the batch delivered again after its 5 s lock', () => {
      const seen = runs('e2eQueueManyNoAutoComplete').flatMap(
        (o) => (o.triggerMetadata as { deliveryCountArray: number[] }).deliveryCountArray,
      );
      return seen.includes(2) ? seen : undefined;
    });
    assert.deepEqual(counts.slice(0, 2), [1, 2]);
    const [first, second] = runs('e2eQueueManyNoAutoComplete');
    assert.ok(second.startedAt - first.startedAt >= 4_000, 'redelivered by lock expiry, not by an abandon');
  });

  it('does not read the queue of a disabled batch trigger, nor of a Service Bus trigger it does not run', async () => {
    await send('e2e-queue-many-disabled', ['d-1']);
    await send('e2e-sb-to-table', ['t-1']);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.deepEqual(
      (await peek('e2e-queue-many-disabled')).map((m) => [m.messageId, m.deliveryCount]),
      [['d-1', 0]],
    );
    assert.deepEqual(
      (await peek('e2e-sb-to-table')).map((m) => [m.messageId, m.deliveryCount]),
      [['t-1', 0]],
    );
  });
});
