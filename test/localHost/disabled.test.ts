import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient } from '@azure/service-bus';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../../emulators/servicebus/index.js';
import { spawnLocalHost, startLocalHost, type LocalHost } from '../../local/host/index.js';
import { emulatorConfig } from './emulatorEntities.js';
import { observations } from './fixtures/app/observations.js';
import { waitFor, writeFixtureApp } from './fixtureApp.js';

/**
 * `AzureWebJobs.<name>.Disabled` = true or 1: the host does not trigger the function (HTTP 404,
 * no timer, no Service Bus receiver), like the Azure host. Other values leave it enabled.
 */
describe('local host: AzureWebJobs.<name>.Disabled', () => {
  let emulator: ServiceBusEmulator;
  let host: LocalHost;
  let client: ServiceBusClient;
  const lines: string[] = [];

  before(async () => {
    emulator = await startServiceBusEmulator({
      config: emulatorConfig({ queues: ['work'], topics: { events: ['audit'] } }),
      port: 0,
    });
    host = await startLocalHost({
      appRoot: writeFixtureApp({ files: '*Functions.js' }),
      httpPort: 0,
      env: {
        ServiceBusConnection: emulator.connectionString,
        WORK_QUEUE: 'work',
        SLOW_TIMER_SCHEDULE: '*/1 * * * * *',
        SLOW_TIMER_MS: '10',
        'AzureWebJobs.hello.Disabled': 'true',
        'AzureWebJobs.DefaultRoute.Disabled': '1',
        'AzureWebJobs.boom.Disabled': 'false',
        'AzureWebJobs.startupTimer.Disabled': 'True',
        'AzureWebJobs.topicWork.Disabled': 'true',
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

  it('lists disabled functions as disabled', () => {
    const disabled = host.functions.filter((f) => f.disabled).map((f) => f.name);
    assert.deepEqual(disabled, ['defaultRoute', 'hello', 'startupTimer', 'topicWork']);
  });

  it('answers 404 for a disabled HTTP function, even with the key; an enabled one still runs', async () => {
    for (const path of ['/hello', '/hello/ann', '/defaultRoute']) {
      const res = await fetch(`${host.baseUrl}${path}`, { headers: { 'x-functions-key': host.functionKey } });
      assert.equal(res.status, 404, path);
      assert.equal(await res.text(), '');
    }
    // "false" does not disable: boom runs (and throws, 500).
    assert.equal((await fetch(`${host.baseUrl}/boom`)).status, 500);
    assert.equal((await fetch(`${host.baseUrl}/orders/1?code=${host.functionKey}`)).status, 200);
  });

  it('never fires a disabled timer, not even runOnStartup, while an enabled one runs', async () => {
    await waitFor('the enabled timer to run twice', () =>
      observations.filter((o) => o.functionName === 'slowTimer' && o.outcome === 'ok').length >= 2
        ? true
        : undefined,
    );
    assert.equal(observations.filter((o) => o.functionName === 'startupTimer').length, 0);
    assert.ok(!lines.some((l) => l.includes("Executing 'Functions.startupTimer'")));
  });

  it('receives nothing for a disabled Service Bus trigger: the message stays in the subscription', async () => {
    const topic = client.createSender('events');
    await topic.sendMessages({ body: 'for a disabled function', messageId: 'disabled-1' });
    await topic.close();
    const queue = client.createSender('work');
    await queue.sendMessages({ body: { id: 'enabled-1' }, messageId: 'enabled-1' });
    await queue.close();
    await waitFor('the enabled queue trigger to run', () =>
      observations.find((o) => o.triggerMetadata?.messageId === 'enabled-1' && o.outcome === 'ok'),
    );
    // A receiver would have locked it: a peek shows it was never delivered.
    const receiver = client.createReceiver('events', 'audit');
    try {
      const peeked = await receiver.peekMessages(10);
      assert.deepEqual(
        peeked.map((m) => [m.messageId, m.deliveryCount]),
        [['disabled-1', 0]],
      );
    } finally {
      await receiver.close();
    }
    assert.equal(observations.filter((o) => o.functionName === 'topicWork').length, 0);
  });

  it('starts when a disabled function could not (a batch trigger, a missing setting): disabled is never a reason to stop', async () => {
    const child = await spawnLocalHost({
      appRoot: writeFixtureApp({ files: 'disabledOnly.js' }),
      env: { 'AzureWebJobs.batchDisabled.Disabled': 'true', 'AzureWebJobs.timerDisabled.Disabled': '1' },
    });
    try {
      assert.equal(await (await fetch(`${child.baseUrl}/alive`)).text(), 'alive');
    } finally {
      await child.kill('SIGKILL');
    }
  });
});
