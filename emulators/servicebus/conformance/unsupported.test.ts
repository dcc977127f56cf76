import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ServiceBusClient } from '@azure/service-bus';
import { newClient, openNamespace, uniqueId, type Namespace } from './harness.js';

const sessionQueue = 'conf-session'; // RequiresSession: true

/**
 * Behaviour an emulator may either support or refuse; refusing must be a prompt, clear error,
 * never a hang. Against Azure or Microsoft's emulator the supported branch runs.
 */
describe('sessions and rule management: supported, or refused clearly', () => {
  let ns: Namespace;
  let client: ServiceBusClient;

  before(async () => {
    ns = await openNamespace();
    client = newClient(ns);
  });

  after(async () => {
    await client.close();
    await ns.close();
  });

  it('refuses to send to a session entity without a sessionId', async () => {
    const sender = client.createSender(sessionQueue);
    await assert.rejects(sender.sendMessages({ body: 'no-session' }), (err: Error) => {
      assert.match(err.message, /session/i);
      return true;
    });
    await sender.close();
  });

  it('accepts a session or refuses the session receiver with a not-implemented error', async () => {
    const sender = client.createSender(sessionQueue);
    const sessionId = uniqueId('s');
    await sender.sendMessages({ body: 'in-session', sessionId });
    await sender.close();
    let receiver;
    try {
      receiver = await client.acceptSession(sessionQueue, sessionId, { receiveMode: 'receiveAndDelete' });
    } catch (err) {
      assert.match(String((err as Error).message), /not (supported|implemented)/i);
      return;
    }
    const got = await receiver.receiveMessages(1, { maxWaitTimeInMs: 5_000 });
    assert.equal(got[0]?.body, 'in-session');
    await receiver.close();
  });

  it('lists rules, or refuses rule management with a not-implemented error', async () => {
    const rules = client.createRuleManager('conf-topic', 'high-priority');
    try {
      const names: string[] = [];
      for await (const rule of rules.listRules()) names.push(rule.name);
      assert.ok(names.includes('priority-high'));
    } catch (err) {
      assert.match(String((err as Error).message), /not (supported|implemented)/i);
    }
  });
});
