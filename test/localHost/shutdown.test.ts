import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ServiceBusClient } from '@azure/service-bus';
import { startServiceBusEmulator } from '../../emulators/servicebus/index.js';
import { spawnLocalHost } from '../../local/host/index.js';
import { emulatorConfig } from './emulatorEntities.js';
import { waitFor, writeFixtureApp } from './fixtureApp.js';

describe('local host CLI: graceful shutdown', () => {
  it('on SIGTERM stops taking requests, finishes the in-flight invocation and exits 0', async () => {
    const appRoot = writeFixtureApp({ files: 'httpFunctions.js' });
    const host = await spawnLocalHost({ appRoot, graceMs: 20_000 });
    try {
      assert.ok(host.functions.some((f) => f.name === 'slow' && f.trigger === 'http'));
      const inFlight = fetch(`${host.baseUrl}/slow?ms=1500`);
      await waitFor('the slow invocation to start', () =>
        host.output.some((l) => l.includes('slow start 1500')),
      );
      host.child.kill('SIGTERM');
      const res = await inFlight;
      assert.equal(res.status, 200);
      assert.equal(await res.text(), 'slept 1500');
      const exit = await host.exited;
      assert.deepEqual(exit, { code: 0, signal: null });
      assert.ok(host.output.some((l) => l.includes('slow done')));
      await assert.rejects(fetch(`${host.baseUrl}/hello`), 'the listener is closed');
    } finally {
      await host.kill('SIGKILL');
    }
  });

  it('abandons what is still running after the grace period and still exits 0', async () => {
    const appRoot = writeFixtureApp({ files: 'httpFunctions.js' });
    const host = await spawnLocalHost({ appRoot, graceMs: 200 });
    try {
      const inFlight = fetch(`${host.baseUrl}/slow?ms=60000`).then(
        (r) => r.status,
        () => 'connection dropped',
      );
      await waitFor('the slow invocation to start', () =>
        host.output.some((l) => l.includes('slow start 60000')),
      );
      host.child.kill('SIGINT');
      const exit = await host.exited;
      assert.deepEqual(exit, { code: 0, signal: null });
      assert.equal(await inFlight, 'connection dropped');
      assert.ok(host.output.some((l) => l.includes('still running after 200 ms')));
    } finally {
      await host.kill('SIGKILL');
    }
  });

  it('abandons a batch still running after the grace period, so its messages are available at once', async () => {
    const emulator = await startServiceBusEmulator({
      config: emulatorConfig({ queues: ['batch-slow'] }),
      port: 0,
    });
    const client = new ServiceBusClient(emulator.connectionString);
    const host = await spawnLocalHost({
      appRoot: writeFixtureApp({ files: 'batchSlow.js' }),
      env: { ServiceBusConnection: emulator.connectionString },
      graceMs: 200,
    });
    try {
      const sender = client.createSender('batch-slow');
      await sender.sendMessages([
        { body: { ms: 60_000 }, messageId: 'slow-1' },
        { body: { ms: 0 }, messageId: 'slow-2' },
      ]);
      await sender.close();
      await waitFor('the batch to start', () => host.output.some((l) => l.includes('batchSlow start')));
      host.child.kill('SIGTERM');
      assert.deepEqual(await host.exited, { code: 0, signal: null });
      // Abandoned: back at once, well inside the queue's 5 s lock, each with one failed delivery.
      const receiver = client.createReceiver('batch-slow');
      const again: { id: string; deliveryCount: number }[] = [];
      const started = Date.now();
      while (again.length < 2 && Date.now() - started < 3_000) {
        for (const m of await receiver.receiveMessages(2, { maxWaitTimeInMs: 500 })) {
          again.push({ id: String(m.messageId), deliveryCount: m.deliveryCount ?? -1 });
          await receiver.completeMessage(m);
        }
      }
      await receiver.close();
      const ran = host.output.find((l) => l.includes('batchSlow start'));
      const size = Number(/batchSlow start (\d+)/.exec(ran ?? '')?.[1]);
      assert.ok(size >= 1, ran);
      // The emulator also frees a dead connection's locks, so the log shows it was the host's abandon.
      assert.ok(
        host.output.some((l) =>
          l.includes(`batchSlow: Abandoning the ${size} message(s) of the batch still running.`),
        ),
        host.output.join('\n'),
      );
      assert.deepEqual(
        again.filter((m) => m.deliveryCount === 1).length,
        size,
        `the ${size} message(s) of the running batch came back abandoned: ${JSON.stringify(again)}`,
      );
    } finally {
      await host.kill('SIGKILL');
      await client.close();
      await emulator.stop();
    }
  });

  it('prints a readiness block and reads local.settings.json without overriding the environment', async () => {
    const appRoot = writeFixtureApp({
      files: 'timerFunctions.js',
      localSettings: { Values: { SLOW_TIMER_SCHEDULE: '0 0 0 1 1 *', FUNCTIONS_LOCAL_KEY: 'from-file' } },
    });
    const host = await spawnLocalHost({
      appRoot,
      env: { FUNCTIONS_LOCAL_KEY: 'from-env', FUNCTIONS_LOCAL_OPERATOR_KEY: 'operator-from-env' },
    });
    try {
      assert.equal(host.functionKey, 'from-env');
      assert.equal(host.operatorKey, 'operator-from-env');
      assert.ok(
        host.output.some((l) =>
          l.startsWith(
            'Operator key (Authorization: Bearer header; signs in as local-operator): operator-from-env',
          ),
        ),
      );
      assert.ok(host.output.some((l) => l.includes('slowTimer: timer 0 0 0 1 1 *')));
      assert.ok(
        host.output.some((l) => l.startsWith('Function key (x-functions-key header or ?code=): from-env')),
      );
    } finally {
      await host.kill('SIGKILL');
    }
  });

  it('fails to start with a clear error when a %SETTING% is missing', async () => {
    const appRoot = writeFixtureApp({ files: 'timerFunctions.js' });
    await assert.rejects(
      spawnLocalHost({ appRoot, env: { SLOW_TIMER_SCHEDULE: '' } }).then(async (h) => h.kill('SIGKILL')),
      /exited \(code 1[\s\S]*schedule refers to app setting "SLOW_TIMER_SCHEDULE", which is not set/,
    );
  });
});
