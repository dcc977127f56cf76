import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient, type ServiceBusReceivedMessage } from '@azure/service-bus';
import { loadConfig, startServiceBusEmulator, type ServiceBusEmulator } from './index.js';

/** Microsoft's sample Config.json from the emulator installer (see fixtures/README.md). */
const samplePath = resolve(__dirname, '../../../emulators/servicebus/fixtures/microsoft-sample-Config.json');
const sample = readFileSync(samplePath, 'utf8');

/** The sample with line and block comments where Microsoft's file has its own. */
function withComments(text: string): string {
  return [
    '// Service Bus emulator configuration: entities are created at start.',
    text
      .replace('"Queues": [', '"Queues": [ // queues of the namespace')
      .replace('"Topics": [', '/* topics, with their subscriptions and rules */\n        "Topics": [')
      .replace('"Logging": {', '// "File" or "Console"\n    "Logging": {'),
  ].join('\n');
}

describe("Microsoft's sample Config.json", () => {
  let dir: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'sb-sample-'));
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  it('loads unchanged: its queue, its topic, correlation filters, the SQL filter and its action', () => {
    const config = loadConfig(samplePath);
    assert.deepEqual(
      config.queues.map((q) => q.name),
      ['queue.1'],
    );
    const [topic] = config.topics;
    assert.equal(topic.name, 'topic.1');
    const rules = Object.fromEntries(topic.subscriptions.map((s) => [s.name, s.rules]));
    assert.equal(rules['subscription.1'][0].filter.kind, 'correlation');
    assert.equal(rules['subscription.3'][0].name, '$Default');
    const sql = rules['subscription.4'][0];
    assert.equal(sql.filter.kind, 'sql');
    assert.equal(sql.action?.expression, "SET sys.To = 'Entity'");
  });

  it('loads with // and /* */ comments, to the same configuration', () => {
    const path = join(dir, 'Config.json');
    writeFileSync(path, withComments(sample));
    assert.deepEqual(loadConfig(path), loadConfig(samplePath));
  });

  it('still refuses broken JSON, naming the line and column', () => {
    const path = join(dir, 'Broken.json');
    writeFileSync(path, withComments(sample).replace('"Name": "queue.1",', '"Name": "queue.1"'));
    assert.throws(
      () => loadConfig(path),
      /Broken\.json is not valid JSON: CommaExpected at line \d+, column \d+/,
    );
  });

  describe('served by the emulator to the real SDK', () => {
    let emulator: ServiceBusEmulator;
    let client: ServiceBusClient;

    before(async () => {
      const path = join(dir, 'Served.json');
      writeFileSync(path, withComments(sample));
      emulator = await startServiceBusEmulator({ config: path, port: 0 });
      client = new ServiceBusClient(emulator.connectionString);
    });

    after(async () => {
      await client.close();
      await emulator.stop();
    });

    async function all(subscription: string): Promise<ServiceBusReceivedMessage[]> {
      const r = client.createReceiver('topic.1', subscription, { receiveMode: 'receiveAndDelete' });
      const got = await r.receiveMessages(10, { maxWaitTimeInMs: 1_000 });
      got.push(...(await r.receiveMessages(10, { maxWaitTimeInMs: 300 })));
      await r.close();
      return got;
    }

    it('routes by its correlation filters, its SQL filter and applies its action', async () => {
      const sender = client.createSender('topic.1');
      await sender.sendMessages([
        { body: 'sql', messageId: '123456', applicationProperties: { userProp1: 'value1' } },
        { body: 'sql-wrong-id', messageId: '654321', applicationProperties: { userProp1: 'value1' } },
        { body: 'prop', applicationProperties: { prop1: 'value1' } },
        {
          body: 'correlated',
          contentType: 'application/text',
          correlationId: 'id1',
          subject: 'subject1',
          messageId: 'msgid1',
          replyTo: 'someQueue',
          replyToSessionId: 'sessionId',
          sessionId: 'session1',
          to: 'xyz',
        },
      ]);
      await sender.close();

      const sub1 = await all('subscription.1');
      assert.deepEqual(
        sub1.map((m) => m.body),
        ['correlated'],
      );
      const sub2 = await all('subscription.2');
      assert.deepEqual(
        sub2.map((m) => m.body),
        ['prop'],
      );
      const sub3 = await all('subscription.3');
      assert.deepEqual(
        sub3.map((m) => m.body),
        ['sql', 'sql-wrong-id', 'prop', 'correlated'],
      );
      const sub4 = await all('subscription.4');
      assert.deepEqual(
        sub4.map((m) => m.body),
        ['sql'],
      );
      assert.equal(sub4[0].to, 'Entity', "the rule's action set sys.To");
      assert.equal(sub3[0].to, undefined, 'other subscriptions keep the message as sent');

      const queue = client.createSender('queue.1');
      await queue.sendMessages({ body: 'queued' });
      await queue.close();
      const r = client.createReceiver('queue.1', { receiveMode: 'receiveAndDelete' });
      const [m] = await r.receiveMessages(1, { maxWaitTimeInMs: 5_000 });
      assert.equal(m?.body, 'queued');
      await r.close();
    });
  });
});
