import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage } from '@azure/service-bus';
import { newClient, openNamespace, purge, receiveAtLeast, uniqueId, type Namespace } from './harness.js';

const topic = 'conf-sql-topic';
// Rules as declared in ./Config.json.
const subscriptions = ['sql-numbers', 'sql-like', 'sql-null', 'sql-action', 'sql-two-rules'] as const;

describe('SQL filters and rule actions route topic messages', () => {
  let ns: Namespace;
  let client: ServiceBusClient;

  before(async () => {
    ns = await openNamespace();
    client = newClient(ns);
    for (const sub of subscriptions) {
      const r = client.createReceiver(topic, sub, { receiveMode: 'receiveAndDelete' });
      await purge(client, r);
      await r.close();
    }
  });

  after(async () => {
    await client.close();
    await ns.close();
  });

  async function drain(sub: string, expected: number): Promise<ServiceBusReceivedMessage[]> {
    const r = client.createReceiver(topic, sub, { receiveMode: 'receiveAndDelete' });
    const got = await receiveAtLeast(r, expected);
    got.push(...(await r.receiveMessages(10, { maxWaitTimeInMs: 500 })));
    await r.close();
    return got;
  }

  it('delivers each message to exactly the subscriptions whose filter is true', async () => {
    const run = uniqueId('sql');
    const messages: Array<ServiceBusMessage & { body: string }> = [
      { body: 'q50', applicationProperties: { quantity: 50 } },
      { body: 'q5-high', applicationProperties: { quantity: 5, priority: 'high' } },
      { body: 'q500', applicationProperties: { quantity: 500 } },
      { body: 'q-string', applicationProperties: { quantity: '50' } },
      { body: 'order-us', subject: 'order-created', applicationProperties: { region: 'us-east' } },
      { body: 'order-eu', subject: 'order-created', applicationProperties: { region: 'eu-west' } },
      { body: 'order-noregion', subject: 'order-created' },
      { body: 'tenant-beta', applicationProperties: { tenant: 'beta' } },
      { body: 'tenant-discount', applicationProperties: { tenant: 'beta', discount: 10 } },
      { body: 'nothing' },
    ];
    const sender = client.createSender(topic);
    await sender.sendMessages(messages.map((m, i) => ({ ...m, messageId: `${run}-${i}` })));
    await sender.close();

    const expected: Record<string, string[]> = {
      'sql-numbers': ['q5-high', 'q50'],
      'sql-like': ['order-us'],
      'sql-null': ['tenant-beta'],
      'sql-action': [],
      'sql-two-rules': ['q5-high', 'q500'],
    };
    for (const sub of subscriptions) {
      const got = await drain(sub, expected[sub].length);
      assert.deepEqual(got.map((m) => m.body).sort(), [...expected[sub]].sort(), sub);
    }
  });

  it('applies the action of the matching rule to that subscription copy only', async () => {
    const sender = client.createSender(topic);
    const id = uniqueId('sql-action');
    await sender.sendMessages({
      body: 'alpha',
      messageId: id,
      subject: 'original',
      applicationProperties: { tenant: 'alpha', secret: 's3cr3t', quantity: 60, priority: 'high' },
    });
    await sender.close();

    const [acted] = await drain('sql-action', 1);
    assert.equal(acted.messageId, id);
    assert.equal(acted.subject, 'routed-alpha');
    assert.equal(acted.applicationProperties?.routed, 'yes');
    assert.equal(acted.applicationProperties?.secret, undefined, 'REMOVE dropped it');
    assert.equal(acted.applicationProperties?.tenant, 'alpha');

    // Other subscriptions see the message as sent, with only their own rule's changes.
    const [plain] = await drain('sql-null', 1);
    assert.equal(plain.subject, 'original');
    assert.equal(plain.applicationProperties?.secret, 's3cr3t');
    assert.equal(plain.applicationProperties?.routed, undefined);

    const [both] = await drain('sql-two-rules', 1);
    assert.equal(both.messageId, id, 'one copy although two rules match');
    assert.equal(both.applicationProperties?.matchedHigh, true);
    assert.equal(both.applicationProperties?.matchedBig, true);
    assert.equal(both.subject, 'original');

    const [numbers] = await drain('sql-numbers', 1);
    assert.equal(numbers.messageId, id);
    assert.equal(numbers.applicationProperties?.matchedHigh, undefined);
  });
});
