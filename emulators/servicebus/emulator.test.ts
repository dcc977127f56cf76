/**
 * Tests of the emulator's own parts (config loading, counters, keepalive, CLI arguments).
 * Behaviour the SDK sees is covered by conformance/, which uses only the public SDK API.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { ServiceBusClient } from '@azure/service-bus';
import { connect } from 'rhea';
import { parseArgs } from './cli.js';
import { ConfigError, loadConfig, parseIsoDuration, startServiceBusEmulator } from './index.js';

const root = resolve(__dirname, '../../..');
const appConfig = resolve(root, 'infra/servicebus-emulator/Config.json');
const fixture = resolve(root, 'emulators/servicebus/conformance/Config.json');

function doc(queueProps: Record<string, unknown>, extra: Record<string, unknown> = {}): object {
  return {
    UserConfig: {
      Namespaces: [
        { Name: 'sbemulatorns', Queues: [{ Name: 'q', Properties: queueProps }], Topics: [], ...extra },
      ],
      Logging: { Type: 'File' },
    },
  };
}

describe('config', () => {
  it('parses ISO-8601 durations', () => {
    assert.equal(parseIsoDuration('PT5S', 'x'), 5_000);
    assert.equal(parseIsoDuration('PT1M', 'x'), 60_000);
    assert.equal(parseIsoDuration('PT1H30M', 'x'), 5_400_000);
    assert.equal(parseIsoDuration('P14D', 'x'), 14 * 86_400_000);
    assert.equal(parseIsoDuration('PT0.5S', 'x'), 500);
    for (const bad of ['', 'P', 'PT', '5S', 'PT5', 'P1H', 'PTXS']) {
      assert.throws(() => parseIsoDuration(bad, 'x'), ConfigError, bad);
    }
  });

  it("loads the app's Config.json and the conformance fixture", () => {
    const app = loadConfig(appConfig);
    assert.deepEqual(
      app.queues.map((q) => q.name),
      [
        'scheduler',
        'agent-inventory',
        'agent-payment',
        'agent-shipping',
        'agent-inventory-waiting',
        'agent-payment-waiting',
        'agent-shipping-waiting',
        'operator-alerts',
        'poison',
      ],
    );
    assert.equal(app.queues[0].lockDurationMs, 60_000);
    assert.equal(app.queues[0].duplicateDetection.windowMs, 300_000);
    // A waiting request that expires is past its complete-by: it goes, not to the dead letters.
    const waiting = app.queues.find((q) => q.name === 'agent-payment-waiting')!;
    assert.deepEqual(
      [
        waiting.maxDeliveryCount,
        waiting.lockDurationMs,
        waiting.defaultTtlMs,
        waiting.deadLetterOnExpiration,
      ],
      [10, 60_000, 3_600_000, false],
    );
    assert.equal(app.topics[0].subscriptions[0].rules[0].name, '$Default');
    const conf = loadConfig(fixture);
    const high = conf.topics[0].subscriptions.find((s) => s.name === 'high-priority')!;
    assert.deepEqual(high.rules[0].filter, {
      kind: 'correlation',
      filter: { properties: { priority: 'high' } },
    });
  });

  it('rejects bad input with a clear error', () => {
    assert.throws(() => loadConfig(doc({ LockDuration: '5 seconds' })), /LockDuration/);
    assert.throws(() => loadConfig(doc({ MaxDeliveryCount: 0 })), /MaxDeliveryCount/);
    assert.throws(() => loadConfig(doc({ ForwardTo: 'elsewhere' })), /forwards to "elsewhere"/);
    assert.throws(() => loadConfig({}), /UserConfig.Namespaces/);
    assert.throws(() => loadConfig('/no/such/Config.json'), /cannot read/);
    assert.throws(
      () =>
        loadConfig({
          UserConfig: {
            Namespaces: [
              {
                Name: 'n',
                Queues: [{ Name: 'same' }],
                Topics: [{ Name: 'SAME', Subscriptions: [{ Name: 's' }] }],
              },
            ],
          },
        }),
      /declared twice/,
    );
    assert.throws(
      () =>
        loadConfig({
          UserConfig: {
            Namespaces: [
              {
                Name: 'n',
                Queues: [],
                Topics: [
                  {
                    Name: 't',
                    Subscriptions: [
                      {
                        Name: 's',
                        Rules: [
                          {
                            Name: 'r',
                            Properties: { FilterType: 'Sql', SqlFilter: { SqlExpression: "a = 'b' AND" } },
                          },
                        ],
                      },
                    ],
                  },
                ],
              },
            ],
          },
        }),
      /Rules\[0\]\.Properties\.SqlFilter\.SqlExpression: expected a value or a property at the end/,
    );
  });
});

describe('emulator process', () => {
  it('counts sends, deliveries, settlements and peeks per entity', async () => {
    const emulator = await startServiceBusEmulator({ config: doc({ LockDuration: 'PT5S' }), port: 0 });
    const client = new ServiceBusClient(emulator.connectionString);
    try {
      const sender = client.createSender('q');
      await sender.sendMessages([{ body: 1 }, { body: 2 }]);
      const receiver = client.createReceiver('q');
      const got = await receiver.receiveMessages(2, { maxWaitTimeInMs: 5_000 });
      assert.equal(got.length, 2);
      await receiver.completeMessage(got[0]);
      await receiver.abandonMessage(got[1]);
      const q = emulator.counters().entities.find((e) => e.path === 'q')!;
      assert.equal(q.enqueued, 2);
      assert.equal(q.delivered, 2);
      assert.equal(q.completed, 1);
      assert.equal(q.abandoned, 1);
      assert.equal(q.activeMessages, 1);
      assert.equal(emulator.counters().senders.find((s) => s.path === 'q')!.sent, 2);
      assert.equal(q.peeks, 0);
      const peeked = await receiver.peekMessages(5);
      const after = emulator.counters().entities.find((e) => e.path === 'q')!;
      assert.equal(after.peeks, 1);
      assert.equal(after.peeked, peeked.length);
      assert.equal(peeked.length, 1, 'one message left to peek');
    } finally {
      await client.close();
      await emulator.stop();
    }
  });

  it('keeps an idle connection alive by answering the peer idle timeout with heartbeats', async () => {
    const emulator = await startServiceBusEmulator({ config: doc({}), port: 0 });
    try {
      const connection = connect({
        host: '127.0.0.1',
        port: emulator.port,
        idle_time_out: 500,
        reconnect: false,
      });
      await new Promise<void>((res, rej) => {
        connection.once('connection_open', () => res());
        connection.once('disconnected', () => rej(new Error('disconnected before open')));
      });
      await new Promise((r) => setTimeout(r, 2_500));
      assert.equal(connection.is_open(), true, 'still open after 5x the idle timeout');
      await new Promise<void>((res) => {
        connection.once('connection_close', () => res());
        connection.close();
      });
    } finally {
      await emulator.stop();
    }
  });

  // Microsoft's emulator takes DefaultMessageTimeToLive from PT5M only, so this stays out of the
  // portable conformance fixture; it still goes through the public SDK.
  it("applies the entity's DefaultMessageTimeToLive to a message that sets none", async () => {
    const config = doc({ DefaultMessageTimeToLive: 'PT2S', DeadLetteringOnMessageExpiration: true });
    const emulator = await startServiceBusEmulator({ config, port: 0 });
    const client = new ServiceBusClient(emulator.connectionString);
    try {
      await client.createSender('q').sendMessages({ body: 'short-lived', messageId: 'ttl-1' });
      const receiver = client.createReceiver('q');
      assert.equal((await receiver.peekMessages(1))[0]?.messageId, 'ttl-1', 'there before it expires');
      await new Promise((r) => setTimeout(r, 3_000));
      assert.equal((await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 })).length, 0, 'expired');
      const dlq = client.createReceiver('q', { subQueueType: 'deadLetter' });
      const [dead] = await dlq.receiveMessages(1, { maxWaitTimeInMs: 5_000 });
      assert.equal(dead?.messageId, 'ttl-1');
      assert.equal(dead?.deadLetterReason, 'TTLExpiredException');
    } finally {
      await client.close();
      await emulator.stop();
    }
  });

  it('accepts SASL PLAIN (any key) as well as the ANONYMOUS the SDK uses', async () => {
    const emulator = await startServiceBusEmulator({ config: doc({}), port: 0 });
    try {
      const connection = connect({
        host: '127.0.0.1',
        port: emulator.port,
        username: 'RootManageSharedAccessKey',
        password: 'SAS_KEY_VALUE',
        reconnect: false,
      });
      const opened = await new Promise<boolean>((res) => {
        connection.once('connection_open', () => res(true));
        connection.once('disconnected', () => res(false));
      });
      // rhea picks PLAIN when a username and password are given; with PLAIN not offered it fails.
      assert.equal(opened, true);
      await new Promise<void>((res) => {
        connection.once('connection_close', () => res());
        connection.close();
      });
    } finally {
      await emulator.stop();
    }
  });

  it("works with the official emulator's connection string naming localhost", async () => {
    const emulator = await startServiceBusEmulator({ config: doc({}), port: 0 });
    const official = `Endpoint=sb://localhost:${emulator.port};SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;`;
    const client = new ServiceBusClient(official);
    try {
      await client.createSender('q').sendMessages({ body: 'via localhost' });
      const receiver = client.createReceiver('q', { receiveMode: 'receiveAndDelete' });
      const [got] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 5_000 });
      assert.equal(got?.body, 'via localhost');
    } finally {
      await client.close();
      await emulator.stop();
    }
  });

  it('refuses to start on a port in use, and stop is idempotent', async () => {
    const first = await startServiceBusEmulator({ config: doc({}), port: 0 });
    await assert.rejects(startServiceBusEmulator({ config: doc({}), port: first.port }), /EADDRINUSE/);
    await first.stop();
    await first.stop();
  });
});

describe('cli process', () => {
  const cli = resolve(__dirname, 'cli.js');

  it('prints its connection string, serves the SDK, and stops cleanly on SIGINT', async () => {
    const child = spawn(process.execPath, [cli, '--config', fixture, '--port', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const line = await new Promise<string>((res, rej) => {
        let out = '';
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes('\n')) res(out);
        });
        child.once('exit', (code) => rej(new Error(`exited ${code} before listening`)));
      });
      const match = /listening on 127\.0\.0\.1:(\d+) ConnectionString=(\S+)/.exec(line);
      assert.ok(match, line);
      assert.ok(match[2].includes('UseDevelopmentEmulator=true'));
      const client = new ServiceBusClient(match[2]);
      await client.createSender('conf-roundtrip').sendMessages({ body: 'via the cli' });
      const receiver = client.createReceiver('conf-roundtrip', { receiveMode: 'receiveAndDelete' });
      const [got] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 5_000 });
      assert.equal(got?.body, 'via the cli');
      await client.close();
      const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
      child.kill('SIGINT');
      assert.equal(await exited, 0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('exits 2 with the usage on bad arguments, and 1 naming the problem on a bad config', async () => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; err: string }>((res) => {
        const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
        let err = '';
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        child.once('exit', (code) => res({ code, err }));
      });
    const noConfig = await run(['--port', '0']);
    assert.equal(noConfig.code, 2);
    assert.match(noConfig.err, /usage: cli\.js --config/);
    const missing = await run(['--config', resolve(root, 'no-such-Config.json'), '--port', '0']);
    assert.equal(missing.code, 1);
    assert.match(missing.err, /no-such-Config\.json/);
  });
});

describe('cli arguments', () => {
  it('parses flags and rejects bad ones', () => {
    assert.deepEqual(parseArgs(['--config', 'c.json', '--port', '0', '--host', '0.0.0.0', '--data', 'd']), {
      config: 'c.json',
      port: 0,
      host: '0.0.0.0',
      data: 'd',
      verbose: false,
    });
    assert.throws(() => parseArgs([]), /--config is required/);
    assert.throws(() => parseArgs(['--config', 'c', '--port', 'x']), /--port/);
    assert.throws(() => parseArgs(['--config']), /needs a value/);
    assert.throws(() => parseArgs(['--config', 'c', '--bogus']), /unknown argument/);
  });
});
