import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient } from '@azure/service-bus';
import { startLocalHost, type LocalHost } from '../../local/host/index.js';
import { observations, type Observation } from './fixtures/app/observations.js';
import { waitFor, writeFixtureApp } from './fixtureApp.js';

/** Entities for this test, in the official emulator's Config.json format: few deliveries, short locks. */
const emulatorConfig = {
  UserConfig: {
    Namespaces: [
      {
        Name: 'sbemulatorns',
        Queues: [
          {
            Name: 'work',
            Properties: {
              DeadLetteringOnMessageExpiration: false,
              DefaultMessageTimeToLive: 'PT1H',
              DuplicateDetectionHistoryTimeWindow: 'PT5M',
              ForwardDeadLetteredMessagesTo: '',
              ForwardTo: '',
              LockDuration: 'PT5S',
              MaxDeliveryCount: 3,
              RequiresDuplicateDetection: false,
              RequiresSession: false,
            },
          },
        ],
        Topics: [
          {
            Name: 'events',
            Properties: { DefaultMessageTimeToLive: 'PT1H', RequiresDuplicateDetection: false },
            Subscriptions: [
              {
                Name: 'audit',
                Properties: {
                  DefaultMessageTimeToLive: 'PT1H',
                  LockDuration: 'PT5S',
                  MaxDeliveryCount: 3,
                  RequiresSession: false,
                },
              },
            ],
          },
        ],
      },
    ],
    Logging: { Type: 'Console' },
  },
};

interface Emulator {
  connectionString: string;
  stop(): Promise<void>;
}
type StartEmulator = (options: { config: unknown; port: number }) => Promise<Emulator>;

// The emulator lives in emulators/servicebus (built on its own branch); skip with a reason if absent.
const emulatorModule = join(__dirname, '..', '..', 'emulators', 'servicebus', 'index.js');
const skip = existsSync(emulatorModule)
  ? false
  : 'the Service Bus emulator (emulators/servicebus) is not in this build';

function runsOf(messageId: string): Observation[] {
  return observations.filter((o) => o.triggerMetadata?.messageId === messageId);
}

describe('local host: Service Bus triggers against the emulator', { skip }, () => {
  let emulator: Emulator;
  let host: LocalHost;
  let client: ServiceBusClient;
  const lines: string[] = [];

  before(async () => {
    const { startServiceBusEmulator } = (await import(emulatorModule)) as {
      startServiceBusEmulator: StartEmulator;
    };
    emulator = await startServiceBusEmulator({ config: emulatorConfig, port: 0 });
    const appRoot = writeFixtureApp({
      files: 'serviceBusFunctions.js',
      hostJson: {
        version: '2.0',
        extensions: { serviceBus: { maxConcurrentCalls: 4, maxAutoLockRenewalDuration: '00:00:30' } },
      },
    });
    host = await startLocalHost({
      appRoot,
      httpPort: 0,
      env: { ServiceBusConnection: emulator.connectionString, WORK_QUEUE: 'work' },
      log: (line) => lines.push(line),
      shutdownGraceMs: 20_000,
    });
    client = new ServiceBusClient(emulator.connectionString);
  });

  after(async () => {
    await host?.stop();
    await client?.close();
    await emulator?.stop();
  });

  it('lists the queue and topic triggers with their resolved entities', () => {
    assert.deepEqual(
      host.functions.map((f) => [f.name, f.trigger, f.detail]),
      [
        ['topicWork', 'serviceBus', 'events/Subscriptions/audit'],
        ['workQueue', 'serviceBus', 'work'],
      ],
    );
  });

  it('hands the handler the parsed JSON body and the trigger metadata', async () => {
    const sender = client.createSender('work');
    await sender.sendMessages({
      body: { id: 'meta-1', note: 'hello' },
      messageId: 'meta-1',
      correlationId: 'corr-1',
      contentType: 'application/json',
      subject: 'test-subject',
      applicationProperties: { Kind: 'probe', attempt: 2 },
    });
    await sender.close();
    const [run] = await waitFor('the message to reach the handler', () => {
      const runs = runsOf('meta-1').filter((r) => r.outcome === 'ok');
      return runs.length > 0 ? runs : undefined;
    });
    assert.deepEqual(run.input, { id: 'meta-1', note: 'hello' });
    const meta = run.triggerMetadata ?? {};
    assert.equal(meta.deliveryCount, 1);
    assert.equal(meta.messageId, 'meta-1');
    assert.equal(meta.correlationId, 'corr-1');
    assert.equal(meta.contentType, 'application/json');
    assert.equal(meta.subject, 'test-subject');
    assert.equal(meta.label, 'test-subject');
    assert.equal(typeof meta.lockToken, 'string');
    assert.equal(typeof meta.sequenceNumber, 'number');
    assert.ok(!Number.isNaN(Date.parse(String(meta.enqueuedTimeUtc))), 'enqueuedTimeUtc is a date');
    assert.ok(
      Date.parse(String(meta.expiresAtUtc)) > Date.parse(String(meta.enqueuedTimeUtc)),
      'expiresAtUtc',
    );
    // The library camel-cases trigger metadata recursively, application properties included (as in Azure).
    assert.deepEqual(meta.applicationProperties, { kind: 'probe', attempt: 2 });
  });

  it("hands the handler the message's Diagnostic-Id as its trace context, else a new trace", async () => {
    const traceParent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const sender = client.createSender('work');
    await sender.sendMessages([
      {
        body: { id: 'trace-1' },
        messageId: 'trace-1',
        applicationProperties: { 'Diagnostic-Id': traceParent },
      },
      {
        body: { id: 'trace-2' },
        messageId: 'trace-2',
        applicationProperties: { 'Diagnostic-Id': 'garbage' },
      },
    ]);
    await sender.close();
    const traced = await waitFor('the traced message', () => runsOf('trace-1')[0]);
    assert.deepEqual(traced.traceContext, { traceParent, traceState: '', attributes: {} });
    const untraced = await waitFor('the untraced message', () => runsOf('trace-2')[0]);
    const fresh = (untraced.traceContext as { traceParent: string }).traceParent;
    assert.match(fresh, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    assert.notEqual(fresh.split('-')[1], traceParent.split('-')[1]);
  });

  it('completes a message whose handler succeeds: it is never delivered again', async () => {
    const sender = client.createSender('work');
    await sender.sendMessages({ body: { id: 'ok-1' }, messageId: 'ok-1' });
    await sender.close();
    await waitFor('the successful run', () => runsOf('ok-1').find((r) => r.outcome === 'ok'));
    // Longer than the 5 s lock: an unsettled or abandoned message would have come back by now.
    await new Promise((resolve) => setTimeout(resolve, 7_000));
    assert.equal(runsOf('ok-1').length, 1);
  });

  it('abandons a failing message, redelivers it with a growing deliveryCount, and the broker dead-letters it', async () => {
    const sender = client.createSender('work');
    await sender.sendMessages({ body: { id: 'fail-1', fail: true }, messageId: 'fail-1' });
    await sender.close();
    const dlq = client.createReceiver('work', { subQueueType: 'deadLetter' });
    try {
      const [dead] = await waitFor(
        'the message in the dead-letter queue',
        async () => {
          const got = await dlq.receiveMessages(1, { maxWaitTimeInMs: 2_000 });
          return got.length > 0 ? got : undefined;
        },
        60_000,
      );
      assert.equal(dead.messageId, 'fail-1');
      assert.equal(dead.deadLetterReason, 'MaxDeliveryCountExceeded');
      await dlq.completeMessage(dead);
    } finally {
      await dlq.close();
    }
    const runs = runsOf('fail-1');
    assert.deepEqual(
      runs.map((r) => [r.triggerMetadata?.deliveryCount, r.outcome]),
      [
        [1, 'threw'],
        [2, 'threw'],
        [3, 'threw'],
      ],
    );
    assert.ok(
      lines.some(
        (l) => l.includes("Executed 'Functions.workQueue' (Failed") && l.includes('fixture refuses'),
      ),
    );
  });

  it('runs topic subscription triggers', async () => {
    const sender = client.createSender('events');
    await sender.sendMessages({ body: 'plain text event', messageId: 'evt-1' });
    await sender.close();
    const run = await waitFor('the topic message', () =>
      observations.find((o) => o.functionName === 'topicWork'),
    );
    assert.equal(run.input, 'plain text event');
    assert.equal(run.triggerMetadata?.messageId, 'evt-1');
  });

  it('on stop, lets an in-flight invocation finish and completes its message', async () => {
    const sender = client.createSender('work');
    await sender.sendMessages({ body: { id: 'slow-1', sleepMs: 1_500 }, messageId: 'slow-1' });
    await sender.close();
    await waitFor('the slow run to start', () => runsOf('slow-1')[0]);
    await host.stop();
    assert.equal(runsOf('slow-1')[0].outcome, 'ok');
    const receiver = client.createReceiver('work');
    try {
      // Past the 5 s lock: an abandoned or unsettled message would be available again.
      const left = await receiver.receiveMessages(1, { maxWaitTimeInMs: 8_000 });
      assert.deepEqual(
        left.map((m) => m.messageId),
        [],
      );
    } finally {
      await receiver.close();
    }
  });
});
