/**
 * Throughput of the emulator with the real SDK: node dist/emulators/servicebus/bench.js
 * Each case runs for a bounded time (BENCH_SECONDS, default 3) and prints messages per second.
 */
import { ServiceBusClient } from '@azure/service-bus';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServiceBusEmulator } from './index.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 3);
const queues = ['bench-1', 'bench-2', 'bench-3', 'bench-4'];
const queueProps = {
  DeadLetteringOnMessageExpiration: false,
  DefaultMessageTimeToLive: 'PT1H',
  LockDuration: 'PT1M',
  MaxDeliveryCount: 10,
  RequiresDuplicateDetection: false,
  RequiresSession: false,
};
const config = {
  UserConfig: {
    Namespaces: [
      { Name: 'sbemulatorns', Queues: queues.map((Name) => ({ Name, Properties: queueProps })), Topics: [] },
    ],
    Logging: { Type: 'Console' },
  },
};

async function sendCase(cs: string, clients: number, batched: boolean): Promise<number> {
  const end = Date.now() + seconds * 1000;
  const counts = await Promise.all(
    [...Array(clients).keys()].map(async (i) => {
      const client = new ServiceBusClient(cs);
      const sender = client.createSender(queues[i]);
      let n = 0;
      while (Date.now() < end) {
        if (batched) {
          const batch = await sender.createMessageBatch();
          for (let k = 0; k < 100; k++) batch.tryAddMessage({ body: { k, pad: 'x'.repeat(200) } });
          await sender.sendMessages(batch);
          n += batch.count;
        } else {
          await sender.sendMessages({ body: { n, pad: 'x'.repeat(200) } });
          n++;
        }
      }
      await client.close();
      return n;
    }),
  );
  return counts.reduce((a, b) => a + b, 0) / seconds;
}

async function receiveCase(cs: string, clients: number): Promise<number> {
  const end = Date.now() + seconds * 1000;
  const counts = await Promise.all(
    [...Array(clients).keys()].map(async (i) => {
      const client = new ServiceBusClient(cs);
      const receiver = client.createReceiver(queues[i], { maxAutoLockRenewalDurationInMs: 0 });
      let n = 0;
      while (Date.now() < end) {
        const msgs = await receiver.receiveMessages(100, { maxWaitTimeInMs: 500 });
        if (msgs.length === 0) break;
        await Promise.all(msgs.map((m) => receiver.completeMessage(m)));
        n += msgs.length;
      }
      await client.close();
      return n;
    }),
  );
  return counts.reduce((a, b) => a + b, 0) / seconds;
}

async function run(label: string, dataDir?: string): Promise<Array<[string, number]>> {
  const emulator = await startServiceBusEmulator({ config, port: 0, dataDir });
  const cs = emulator.connectionString;
  const rows: Array<[string, number]> = [];
  rows.push([`send single, 1 client${label}`, await sendCase(cs, 1, false)]);
  rows.push([`send single, 4 clients${label}`, await sendCase(cs, 4, false)]);
  rows.push([`send batched (100), 1 client${label}`, await sendCase(cs, 1, true)]);
  rows.push([`send batched (100), 4 clients${label}`, await sendCase(cs, 4, true)]);
  rows.push([`receive+complete peek-lock, 1 client${label}`, await receiveCase(cs, 1)]);
  rows.push([`receive+complete peek-lock, 4 clients${label}`, await receiveCase(cs, 4)]);
  await emulator.stop();
  return rows;
}

/** BENCH_PERSIST=0 skips the persisted variant (same cases with dataDir in a temp folder). */
async function main(): Promise<void> {
  const rows = await run('');
  if (process.env.BENCH_PERSIST !== '0') {
    const dir = mkdtempSync(join(tmpdir(), 'sb-bench-'));
    try {
      rows.push(...(await run(', persisted', dir)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  for (const [name, rate] of rows) process.stdout.write(`${name.padEnd(54)} ${Math.round(rate)} msg/s\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
