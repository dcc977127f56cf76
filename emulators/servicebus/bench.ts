/**
 * Throughput of the emulator with the real SDK: node dist/emulators/servicebus/bench.js
 * Each case runs for a bounded time (BENCH_SECONDS, default 3) and prints messages per second:
 * sends (single, batched), receives (receive-and-delete), receives with complete (pull and
 * streaming), with 1 and 4 clients (one connection and one queue each).
 */
import { ServiceBusClient } from '@azure/service-bus';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServiceBusEmulator } from './index.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 3);
// Enough for several seconds of receiving: a receive case that empties its queue says so.
const prefillPerQueue = Number(process.env.BENCH_PREFILL ?? 20_000);
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

type ReceiveMode = 'receive-and-delete' | 'peek-lock + complete' | 'streaming peek-lock + complete';

/** Fills a queue untimed, so that a receive case measures receiving and never runs dry. */
async function fill(cs: string, queue: string, count: number): Promise<void> {
  const client = new ServiceBusClient(cs);
  const sender = client.createSender(queue);
  for (let sent = 0; sent < count;) {
    const batch = await sender.createMessageBatch();
    while (sent < count && batch.tryAddMessage({ body: { n: sent, pad: 'x'.repeat(200) } })) sent++;
    await sender.sendMessages(batch);
  }
  await client.close();
}

async function drain(cs: string, queue: string): Promise<void> {
  const client = new ServiceBusClient(cs);
  const receiver = client.createReceiver(queue, { receiveMode: 'receiveAndDelete' });
  while ((await receiver.receiveMessages(1000, { maxWaitTimeInMs: 200 })).length > 0);
  await client.close();
}

interface ReceiveResult {
  rate: number;
  ranDry: boolean;
}

async function receiveCase(cs: string, clients: number, mode: ReceiveMode): Promise<ReceiveResult> {
  const used = queues.slice(0, clients);
  for (const q of used) await drain(cs, q);
  for (const q of used) await fill(cs, q, prefillPerQueue);
  let ranDry = false;
  const start = Date.now();
  const end = start + seconds * 1000;
  const counts = await Promise.all(
    used.map(async (queue) => {
      const client = new ServiceBusClient(cs);
      let n = 0;
      if (mode === 'streaming peek-lock + complete') {
        const receiver = client.createReceiver(queue, { maxAutoLockRenewalDurationInMs: 0 });
        const subscription = receiver.subscribe(
          { processMessage: async () => void n++, processError: async () => {} },
          { autoCompleteMessages: true, maxConcurrentCalls: 16 },
        );
        await new Promise((r) => setTimeout(r, end - Date.now()));
        await subscription.close();
        if (n >= prefillPerQueue) ranDry = true;
      } else {
        const receiveMode = mode === 'receive-and-delete' ? 'receiveAndDelete' : 'peekLock';
        const receiver = client.createReceiver(queue, { receiveMode, maxAutoLockRenewalDurationInMs: 0 });
        while (Date.now() < end) {
          const msgs = await receiver.receiveMessages(100, { maxWaitTimeInMs: 500 });
          if (msgs.length === 0) {
            ranDry = true;
            break;
          }
          if (receiveMode === 'peekLock') await Promise.all(msgs.map((m) => receiver.completeMessage(m)));
          n += msgs.length;
        }
      }
      await client.close();
      return n;
    }),
  );
  const total = counts.reduce((a, b) => a + b, 0);
  return { rate: total / ((Date.now() - start) / 1000), ranDry };
}

async function run(label: string, dataDir?: string): Promise<Array<[string, number, string]>> {
  const emulator = await startServiceBusEmulator({ config, port: 0, dataDir });
  const cs = emulator.connectionString;
  const rows: Array<[string, number, string]> = [];
  const who = (clients: number) => (clients === 1 ? '1 client' : `${clients} clients`);
  for (const batched of [false, true]) {
    for (const clients of [1, 4]) {
      const what = batched ? 'send batched (100)' : 'send single';
      rows.push([`${what}, ${who(clients)}${label}`, await sendCase(cs, clients, batched), '']);
    }
  }
  for (const mode of [
    'receive-and-delete',
    'peek-lock + complete',
    'streaming peek-lock + complete',
  ] as const) {
    for (const clients of [1, 4]) {
      const { rate, ranDry } = await receiveCase(cs, clients, mode);
      rows.push([`${mode}, ${who(clients)}${label}`, rate, ranDry ? ' (ran dry: a lower bound)' : '']);
    }
  }
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
  for (const [name, rate, note] of rows) {
    process.stdout.write(`${name.padEnd(58)} ${String(Math.round(rate)).padStart(6)} msg/s${note}\n`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
