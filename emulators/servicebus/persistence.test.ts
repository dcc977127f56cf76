/**
 * Persistence across restarts (`dataDir`): the emulator is stopped and started again on the same
 * folder (a new port each time), and the public SDK checks what came back.
 */
import assert from 'node:assert/strict';
import { appendFileSync, cpSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  ServiceBusClient,
  type ServiceBusReceivedMessage,
  type ServiceBusReceiver,
} from '@azure/service-bus';
import { startServiceBusEmulator, type ServiceBusEmulator } from './index.js';
import { decodeFrames, encodeFrame, LOG_FILE } from './persistence.js';

const config = {
  UserConfig: {
    Namespaces: [
      {
        Name: 'sbemulatorns',
        Queues: [
          {
            Name: 'q',
            Properties: {
              LockDuration: 'PT1M',
              MaxDeliveryCount: 5,
              RequiresDuplicateDetection: true,
              DuplicateDetectionHistoryTimeWindow: 'PT5M',
              DefaultMessageTimeToLive: 'PT1H',
            },
          },
        ],
        Topics: [
          {
            Name: 't',
            Properties: { DefaultMessageTimeToLive: 'PT1H' },
            Subscriptions: [
              { Name: 'all', Properties: { LockDuration: 'PT1M', MaxDeliveryCount: 5 } },
              {
                Name: 'high',
                Properties: { LockDuration: 'PT1M', MaxDeliveryCount: 5 },
                Rules: [
                  {
                    Name: 'high',
                    Properties: {
                      FilterType: 'Correlation',
                      CorrelationFilter: { Properties: { priority: 'high' } },
                    },
                  },
                ],
              },
            ],
          },
        ],
      },
    ],
    Logging: { Type: 'File' },
  },
};

const scratch = mkdtempSync(join(tmpdir(), 'sb-persist-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
let dirs = 0;
const newDir = (): string => join(scratch, `d${++dirs}`);

interface Running {
  emulator: ServiceBusEmulator;
  client: ServiceBusClient;
  lines: string[];
}

async function start(
  dataDir: string | undefined,
  extra: { compactAfterRecords?: number } = {},
): Promise<Running> {
  const lines: string[] = [];
  const emulator = await startServiceBusEmulator({
    config,
    port: 0,
    dataDir,
    log: (l) => lines.push(l),
    ...extra,
  });
  const client = new ServiceBusClient(emulator.connectionString, {
    retryOptions: { maxRetries: 1, timeoutInMs: 20_000 },
  });
  return { emulator, client, lines };
}

async function stop(r: Running): Promise<void> {
  await r.client.close();
  await r.emulator.stop();
}

async function receiveAll(receiver: ServiceBusReceiver, count: number): Promise<ServiceBusReceivedMessage[]> {
  const out: ServiceBusReceivedMessage[] = [];
  const end = Date.now() + 20_000;
  while (out.length < count && Date.now() < end) {
    out.push(...(await receiver.receiveMessages(count - out.length, { maxWaitTimeInMs: 1_000 })));
  }
  return out;
}

/** Confirms nothing more is there (short wait: the point is absence). */
async function nothingMore(receiver: ServiceBusReceiver): Promise<void> {
  const extra = await receiver.receiveMessages(10, { maxWaitTimeInMs: 700 });
  assert.deepEqual(
    extra.map((m) => m.messageId),
    [],
    'no further message',
  );
}

const seqOf = (m: ServiceBusReceivedMessage): number => m.sequenceNumber!.toNumber();

describe('persistence across restarts', () => {
  it('keeps active, batched, scheduled, deferred, dead-lettered and topic messages; drops completed ones', async () => {
    const dir = newDir();
    let r = await start(dir);
    const sender = r.client.createSender('q');
    await sender.sendMessages({
      messageId: 'single-1',
      body: { order: 42, items: ['a', 'b'] },
      subject: 'order-created',
      correlationId: 'corr-1',
      contentType: 'application/json',
      timeToLive: 30 * 60_000,
      applicationProperties: { text: 'x', count: 7, flag: true, when: new Date('2026-01-02T03:04:05Z') },
    });
    await sender.sendMessages(
      [1, 2, 3, 4, 5].map((i) => ({ messageId: `batch-${i}`, body: `b${i}`, applicationProperties: { i } })),
    );
    const batch = await sender.createMessageBatch();
    for (const i of [6, 7])
      assert.ok(batch.tryAddMessage({ messageId: `batch-${i}`, body: Buffer.from([i, 0, 255]) }));
    await sender.sendMessages(batch);
    const dueAt = new Date(Date.now() + 4_000);
    const [scheduledSeq] = await sender.scheduleMessages({ messageId: 'scheduled-1', body: 'later' }, dueAt);
    const [cancelledSeq] = await sender.scheduleMessages({ messageId: 'cancelled-1', body: 'never' }, dueAt);
    await sender.cancelScheduledMessages(cancelledSeq);
    for (const id of ['defer-me', 'dead-me', 'complete-me', 'abandon-me', 'hold-me'])
      await sender.sendMessages({ messageId: id, body: id });
    await r.client.createSender('t').sendMessages([
      { messageId: 'topic-high', body: 'h', applicationProperties: { priority: 'high' } },
      { messageId: 'topic-low', body: 'l', applicationProperties: { priority: 'low' } },
    ]);

    // Settle some by message id: they come in sequence order after the ten sent first.
    const receiver = r.client.createReceiver('q');
    const first = await receiveAll(receiver, 13);
    assert.equal(first.length, 13);
    const byId = new Map(first.map((m) => [m.messageId as string, m]));
    const deferredSeq = byId.get('defer-me')!.sequenceNumber!;
    await receiver.deferMessage(byId.get('defer-me')!);
    await receiver.deadLetterMessage(byId.get('dead-me')!, {
      deadLetterReason: 'Unprocessable',
      deadLetterErrorDescription: 'bad order',
    });
    await receiver.completeMessage(byId.get('complete-me')!);
    await receiver.abandonMessage(byId.get('abandon-me')!, { note: 'tried once' });
    // Everything else stays locked through the restart: the lock is lost, the attempt counted.
    const maxSeqBefore = Math.max(...first.map(seqOf), scheduledSeq.toNumber());

    await r.emulator.stop();
    await r.client.close();

    r = await start(dir);
    assert.ok(r.lines.some((l) => /restored/.test(l)));
    const again = r.client.createReceiver('q');
    const back = await receiveAll(again, 10);
    const ids = back.map((m) => m.messageId);
    assert.deepEqual(
      [...ids].sort(),
      [
        'abandon-me',
        'batch-1',
        'batch-2',
        'batch-3',
        'batch-4',
        'batch-5',
        'batch-6',
        'batch-7',
        'hold-me',
        'single-1',
      ],
      'active messages come back, completed, deferred and dead-lettered ones do not',
    );
    assert.deepEqual(
      back.map(seqOf),
      [...back.map(seqOf)].sort((a, b) => a - b),
      'delivered in sequence order',
    );
    const single = back.find((m) => m.messageId === 'single-1')!;
    assert.deepEqual(single.body, { order: 42, items: ['a', 'b'] });
    assert.equal(single.subject, 'order-created');
    assert.equal(single.correlationId, 'corr-1');
    assert.equal(single.contentType, 'application/json');
    assert.equal(single.applicationProperties?.text, 'x');
    assert.equal(single.applicationProperties?.count, 7);
    assert.equal(single.applicationProperties?.flag, true);
    // The SDK hands timestamps in application properties back as epoch milliseconds.
    assert.equal(single.applicationProperties?.when, Date.parse('2026-01-02T03:04:05Z'));
    assert.equal(single.deliveryCount, 1, 'the lock lost to the restart counts as a delivery');
    assert.equal(seqOf(single), seqOf(byId.get('single-1')!), 'sequence number kept');
    assert.equal(single.enqueuedTimeUtc?.getTime(), byId.get('single-1')!.enqueuedTimeUtc?.getTime());
    assert.deepEqual(back.find((m) => m.messageId === 'batch-6')!.body, Buffer.from([6, 0, 255]));
    assert.equal(back.find((m) => m.messageId === 'batch-3')!.applicationProperties?.i, 3);
    const abandoned = back.find((m) => m.messageId === 'abandon-me')!;
    assert.equal(abandoned.applicationProperties?.note, 'tried once');
    assert.equal(abandoned.deliveryCount, 1);
    for (const m of back) await again.completeMessage(m);

    const [deferred] = await again.receiveDeferredMessages(deferredSeq);
    assert.equal(deferred.messageId, 'defer-me');
    await again.completeMessage(deferred);

    const dlq = r.client.createReceiver('q', { subQueueType: 'deadLetter' });
    const [dead] = await receiveAll(dlq, 1);
    assert.equal(dead.messageId, 'dead-me');
    assert.equal(dead.deadLetterReason, 'Unprocessable');
    assert.equal(dead.deadLetterErrorDescription, 'bad order');
    assert.equal(dead.deadLetterSource, 'q');
    await dlq.completeMessage(dead);

    const allReceiver = r.client.createReceiver('t', 'all');
    const all = await receiveAll(allReceiver, 2);
    assert.deepEqual(all.map((m) => m.messageId).sort(), ['topic-high', 'topic-low']);
    const highReceiver = r.client.createReceiver('t', 'high');
    const high = await receiveAll(highReceiver, 1);
    assert.deepEqual(
      high.map((m) => m.messageId),
      ['topic-high'],
    );
    for (const m of all) await allReceiver.completeMessage(m);
    for (const m of high) await highReceiver.completeMessage(m);

    // The scheduled message shows up when due, not before; the cancelled one never.
    const later = await receiveAll(again, 1);
    assert.equal(later[0]?.messageId, 'scheduled-1');
    assert.ok(later[0].enqueuedTimeUtc!.getTime() >= dueAt.getTime() - 200);
    assert.equal(seqOf(later[0]), scheduledSeq.toNumber());
    await again.completeMessage(later[0]);

    // Sequence numbers continue; the duplicate-detection history survived.
    const next = r.client.createSender('q');
    await next.sendMessages([
      { messageId: 'single-1', body: 'duplicate' },
      { messageId: 'after-restart', body: 'new' },
    ]);
    const fresh = await receiveAll(again, 1);
    assert.equal(fresh[0]?.messageId, 'after-restart');
    assert.ok(seqOf(fresh[0]) > maxSeqBefore, `${seqOf(fresh[0])} > ${maxSeqBefore}`);
    await again.completeMessage(fresh[0]);
    await nothingMore(again);
    await stop(r);

    // Completed everywhere: a third start finds nothing.
    r = await start(dir);
    await nothingMore(r.client.createReceiver('q'));
    await nothingMore(r.client.createReceiver('q', { subQueueType: 'deadLetter' }));
    await nothingMore(r.client.createReceiver('t', 'all'));
    await stop(r);
  });

  it('an acknowledged send is on disk before the emulator stops (crash copy)', async () => {
    const dir = newDir();
    const r = await start(dir);
    const sender = r.client.createSender('q');
    await sender.sendMessages([
      { messageId: 'durable-1', body: 1 },
      { messageId: 'durable-2', body: 2 },
    ]);
    await sender.scheduleMessages({ messageId: 'durable-3', body: 3 }, new Date(Date.now() + 60_000));
    // Copy the folder as a crash would leave it: no clean stop, no final flush.
    const crashed = newDir();
    cpSync(dir, crashed, { recursive: true });
    await stop(r);

    const after = await start(crashed);
    const receiver = after.client.createReceiver('q');
    const got = await receiveAll(receiver, 2);
    assert.deepEqual(got.map((m) => m.messageId).sort(), ['durable-1', 'durable-2']);
    const peeked = await receiver.peekMessages(10, { fromSequenceNumber: got[0].sequenceNumber });
    assert.ok(
      peeked.some((m) => m.messageId === 'durable-3'),
      'scheduled message kept',
    );
    await stop(after);
  });

  it('tolerates a torn last record with a log line', async () => {
    const dir = newDir();
    let r = await start(dir);
    await r.client.createSender('q').sendMessages([1, 2, 3].map((i) => ({ messageId: `m${i}`, body: i })));
    await stop(r);
    // A crash half-way through appending a record.
    const frame = encodeFrame({ k: 'x', s: 'q', q: 1 });
    appendFileSync(join(dir, LOG_FILE), frame.subarray(0, frame.length - 3));
    r = await start(dir);
    assert.ok(
      r.lines.some((l) => /torn or corrupt tail of \d+ bytes/.test(l)),
      `log says so: ${r.lines.join('\n')}`,
    );
    const receiver = r.client.createReceiver('q');
    const got = await receiveAll(receiver, 3);
    assert.deepEqual(got.map((m) => m.messageId).sort(), ['m1', 'm2', 'm3']);
    for (const m of got) await receiver.completeMessage(m);
    await stop(r);
    // The start rewrote the log without the torn bytes.
    const file = readFileSync(join(dir, LOG_FILE));
    assert.equal(decodeFrames(file).validBytes, file.length);
  });

  it('a corrupt record (bad checksum) ends the replay there instead of failing the start', async () => {
    const dir = newDir();
    let r = await start(dir);
    await r.client.createSender('q').sendMessages({ messageId: 'kept', body: 1 });
    await stop(r);
    const good = readFileSync(join(dir, LOG_FILE)).length;
    const frame = encodeFrame({ k: 'x', s: 'q', q: 1 });
    frame[frame.length - 1] ^= 0xff;
    appendFileSync(join(dir, LOG_FILE), frame);
    r = await start(dir);
    assert.ok(r.lines.some((l) => l.includes(`at offset ${good}`)));
    const got = await receiveAll(r.client.createReceiver('q'), 1);
    assert.equal(got[0]?.messageId, 'kept', 'the corrupt delete record was not applied');
    await stop(r);
  });

  it('compacts the log so it does not grow without bound', async () => {
    const dir = newDir();
    let r = await start(dir, { compactAfterRecords: 50 });
    const sender = r.client.createSender('t');
    const receiver = r.client.createReceiver('t', 'all');
    for (let round = 0; round < 10; round++) {
      await sender.sendMessages(
        Array.from({ length: 30 }, (_, i) => ({ messageId: `c${round}-${i}`, body: 'x'.repeat(200) })),
      );
      const got = await receiveAll(receiver, 30);
      assert.equal(got.length, 30);
      for (const m of got) await receiver.completeMessage(m);
    }
    await sender.sendMessages({ messageId: 'last', body: 'kept' });
    // 300 messages sent (a topic: no duplicate-detection history to keep), locked and
    // completed: ~900 records without compaction.
    const { records } = decodeFrames(readFileSync(join(dir, LOG_FILE)));
    assert.ok(records.length < 250, `${records.length} records after compaction`);
    assert.ok(statSync(join(dir, LOG_FILE)).size < 250 * 1_000);
    await stop(r);
    r = await start(dir);
    const after = r.client.createReceiver('t', 'all');
    const got = await receiveAll(after, 1);
    assert.equal(got[0]?.messageId, 'last');
    assert.ok(seqOf(got[0]) > 300);
    await nothingMore(after);
    await stop(r);
  });

  it('dead-letters at restart a message whose lost lock used up its delivery attempts', async () => {
    const dir = newDir();
    let r = await start(dir);
    await r.client.createSender('q').sendMessages({ messageId: 'poison', body: 'p' });
    const receiver = r.client.createReceiver('q');
    for (let i = 0; i < 4; i++) {
      const [m] = await receiveAll(receiver, 1);
      await receiver.abandonMessage(m);
    }
    const [m] = await receiveAll(receiver, 1);
    assert.equal(m.deliveryCount, 4);
    await r.emulator.stop();
    await r.client.close();
    r = await start(dir);
    await nothingMore(r.client.createReceiver('q'));
    const [dead] = await receiveAll(r.client.createReceiver('q', { subQueueType: 'deadLetter' }), 1);
    assert.equal(dead?.messageId, 'poison');
    assert.equal(dead.deadLetterReason, 'MaxDeliveryCountExceeded');
    await stop(r);
  });

  it('without dataDir nothing is kept', async () => {
    let r = await start(undefined);
    await r.client.createSender('q').sendMessages({ messageId: 'gone', body: 1 });
    await stop(r);
    r = await start(undefined);
    await nothingMore(r.client.createReceiver('q'));
    await stop(r);
  });

  it('refuses a log written in an unknown format version', async () => {
    const dir = newDir();
    const r = await start(dir);
    await stop(r);
    appendFileSync(join(dir, LOG_FILE), encodeFrame({ k: 'h', v: 99 }));
    await assert.rejects(start(dir), /format version 99/);
  });
});
