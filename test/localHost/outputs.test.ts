import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient, type ServiceBusReceivedMessage } from '@azure/service-bus';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../../emulators/servicebus/index.js';
import { spawnLocalHost, startLocalHost, type LocalHost } from '../../local/host/index.js';
import { emulatorConfig } from './emulatorEntities.js';
import { waitFor, writeFixtureApp } from './fixtureApp.js';

/**
 * Service Bus output bindings (a return value, extraOutputs, an array) reach the broker through
 * the SDK, like the Azure host's Service Bus extension sends them; a function with an output type
 * the host does not implement is not run (never run with its output dropped).
 */
describe('local host: Service Bus output bindings', () => {
  let emulator: ServiceBusEmulator;
  let host: LocalHost;
  let client: ServiceBusClient;
  const lines: string[] = [];

  before(async () => {
    emulator = await startServiceBusEmulator({
      config: emulatorConfig({ queues: ['inbox', 'fanin', 'outbox'], topics: { events: ['all'] } }),
      port: 0,
    });
    host = await startLocalHost({
      appRoot: writeFixtureApp({ files: 'outputBindings.js' }),
      httpPort: 0,
      env: { ServiceBusConnection: emulator.connectionString },
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

  async function receive(
    count: number,
    ...entity: [string] | [string, string]
  ): Promise<ServiceBusReceivedMessage[]> {
    const receiver =
      entity.length === 1 ? client.createReceiver(entity[0]) : client.createReceiver(entity[0], entity[1]);
    const got: ServiceBusReceivedMessage[] = [];
    try {
      await waitFor(`${count} message(s) on ${entity.join('/')}`, async () => {
        const batch = await receiver.receiveMessages(count - got.length, { maxWaitTimeInMs: 1_000 });
        for (const m of batch) {
          got.push(m);
          await receiver.completeMessage(m);
        }
        return got.length >= count ? true : undefined;
      });
    } finally {
      await receiver.close();
    }
    return got;
  }

  it("sends a Service Bus trigger's return value to its output queue", async () => {
    const sender = client.createSender('inbox');
    await sender.sendMessages({ body: { id: 'r-1' }, messageId: 'r-1' });
    await sender.close();
    const [sent] = await receive(1, 'outbox');
    assert.deepEqual(sent.body, { forwarded: { id: 'r-1' } });
    assert.ok(lines.some((l) => l.includes("Executed 'Functions.forward' (Succeeded")));
  });

  it('sends extraOutputs: an array as one message per element to a topic, a string as text', async () => {
    const sender = client.createSender('fanin');
    await sender.sendMessages({ body: { count: 3 }, messageId: 'fan-1' });
    await sender.close();
    const parts = await receive(3, 'events', 'all');
    assert.deepEqual(
      parts
        .map((m) => m.body as unknown)
        .sort((a, b) => (a as { part: number }).part - (b as { part: number }).part),
      [
        { part: 1, of: 3 },
        { part: 2, of: 3 },
        { part: 3, of: 3 },
      ],
    );
    const [text] = await receive(1, 'outbox');
    assert.equal(Buffer.isBuffer(text.body) ? text.body.toString('utf8') : text.body, 'fanned out 3');
  });

  it("sends an HTTP function's extra output before it answers", async () => {
    const res = await fetch(`${host.baseUrl}/enqueue`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ n: 42 }),
    });
    assert.equal(res.status, 202);
    const [sent] = await receive(1, 'outbox');
    assert.deepEqual(sent.body, { fromHttp: { n: 42 } });
  });

  it('fails the invocation (500, logged as Failed) when an output cannot be sent, instead of losing it', async () => {
    const res = await fetch(`${host.baseUrl}/enqueueNowhere`, { method: 'POST', body: '{}' });
    assert.equal(res.status, 500);
    assert.ok(
      lines.some(
        (l) => l.includes("Executed 'Functions.enqueueNowhere' (Failed") && l.includes('no-such-queue'),
      ),
      'the failure names the entity',
    );
  });

  it('refuses to start when an output binding names a connection setting that is not set', async () => {
    await assert.rejects(
      spawnLocalHost({
        appRoot: writeFixtureApp({ files: 'httpOutputOnly.js' }),
        env: { OutputConnection: '' },
      }).then((h) => h.kill('SIGKILL')),
      /exited \(code 1[\s\S]*Function "audited": Service Bus output binding "\w+" needs the app setting OutputConnection \(a connection string\) or OutputConnection__fullyQualifiedNamespace/,
    );
  });

  it('starts an app with an output binding type it does not implement, says so once, and answers 501 for that function', async () => {
    const child = await spawnLocalHost({ appRoot: writeFixtureApp({ files: 'storageQueueOutput.js' }) });
    try {
      const res = await fetch(`${child.baseUrl}/queueJob`, { method: 'POST', body: 'job' });
      assert.equal(res.status, 501);
      assert.equal(res.headers.get('content-type'), 'application/problem+json');
      const warnings = child.output.filter((l) => l.includes('[Warning] queueJob: This function is not run'));
      assert.equal(warnings.length, 1, child.output.join('\n'));
      assert.match(warnings[0], /output binding "[^"]+" of type "queue" is not sent here/);
      assert.ok(
        child.output.some((l) => /queueJob: http .*\(not run: answers 501\)/.test(l)),
        'the readiness list says so',
      );
    } finally {
      await child.kill('SIGKILL');
    }
  });
});
