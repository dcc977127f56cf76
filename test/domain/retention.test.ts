import assert from 'node:assert/strict';
import { test } from 'node:test';
import { processStates } from '../../shared/domain/state.js';
import {
  archiveBlobName,
  archiveShards,
  defaultRetention,
  expiredTombstoneDays,
  purgeSelection,
  retentionCutoff,
  retentionVerdict,
  sliceSize,
  utcDay,
  type RetentionPolicy,
} from '../../shared/domain/retention.js';

const day = 86_400_000;
const now = new Date('2030-06-01T12:00:00.000Z');
const policy = (over: Partial<RetentionPolicy> = {}): RetentionPolicy => ({ ...defaultRetention, ...over });

test('the defaults: 90 days, tombstones a year, archive on', () => {
  assert.equal(defaultRetention.orderRetentionDays, 90);
  assert.equal(defaultRetention.idempotencyRetentionDays, 365);
  assert.equal(defaultRetention.archive, true);
});

test('cutoff: days before now; 0 keeps everything', () => {
  assert.equal(retentionCutoff(now, 0), null);
  assert.equal(retentionCutoff(now, 90)!.getTime(), now.getTime() - 90 * day);
  assert.equal(retentionCutoff(now, 1)!.getTime(), now.getTime() - day);
});

test('verdict, every state x held x age x retention: only an unheld terminal order past retention is purged', () => {
  const ages = [0, 89 * day, 90 * day - 1, 90 * day, 90 * day + 1, 400 * day];
  for (const processState of processStates) {
    for (const held of [false, true]) {
      for (const age of ages) {
        for (const days of [0, 1, 90]) {
          const since = new Date(now.getTime() - age);
          const verdict = retentionVerdict(
            { processState, since, held },
            now,
            policy({ orderRetentionDays: days }),
          );
          const terminal = ['Processed', 'Compensated', 'Error'].includes(processState);
          const expected = held
            ? 'held'
            : !terminal
              ? 'live'
              : days === 0
                ? 'retention-off'
                : age >= days * day
                  ? 'purge'
                  : 'young';
          assert.equal(verdict, expected, `${processState} held=${held} age=${age} days=${days}`);
        }
      }
    }
  }
});

test('slice size: the purge rate over the run interval, at least 1, at most the cap', () => {
  assert.equal(sliceSize(policy({ purgeRatePerSecond: 20 }), 30), 500);
  assert.equal(sliceSize(policy({ purgeRatePerSecond: 2 }), 30), 60);
  assert.equal(sliceSize(policy({ purgeRatePerSecond: 1 }), 0), 1);
  assert.equal(sliceSize(policy({ purgeRatePerSecond: 1000 }), 30, 200), 200);
});

test('selection: oldest first across states, past the cutoff only, terminal only, each order once, at most n', () => {
  const cutoff = new Date(now.getTime() - 90 * day);
  const c = (orderId: string, state: (typeof processStates)[number], daysAgo: number) => ({
    orderId,
    state,
    since: new Date(now.getTime() - daysAgo * day),
  });
  const candidates = [
    c('b', 'Compensated', 100),
    c('a', 'Processed', 200),
    c('young', 'Processed', 10),
    c('live', 'Pending', 300),
    c('e', 'Error', 150),
    c('a', 'Error', 120),
  ];
  assert.deepEqual(
    purgeSelection(candidates, cutoff, 10).map((x) => x.orderId),
    ['a', 'e', 'b'],
  );
  assert.deepEqual(
    purgeSelection(candidates, cutoff, 2).map((x) => x.orderId),
    ['a', 'e'],
  );
  assert.deepEqual(purgeSelection(candidates, null, 10), []);
  assert.deepEqual(purgeSelection(candidates, cutoff, 0), []);
});

test('archive names: per day the order became terminal and shard, the same on every retry', () => {
  const id = '3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b';
  const at = new Date('2030-01-02T23:59:59.999Z');
  const name = archiveBlobName(id, at);
  assert.match(name, /^orders\/2030-01-02\/\d{2}\.jsonl\.gz$/);
  assert.equal(archiveBlobName(id, at), name);
  const shards = new Set(
    Array.from({ length: 2000 }, (_, i) =>
      archiveBlobName(`00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, at),
    ),
  );
  assert.equal(shards.size, archiveShards);
  assert.equal(utcDay(at), '2030-01-02');
});

test('expired tombstone days: strictly before the cutoff day; none when kept forever', () => {
  const cutoff = new Date('2030-01-10T05:00:00Z');
  assert.deepEqual(expiredTombstoneDays(['2030-01-10', '2030-01-09', '2029-12-31', '2030-02-01'], cutoff), [
    '2029-12-31',
    '2030-01-09',
  ]);
  assert.deepEqual(expiredTombstoneDays(['2000-01-01'], null), []);
});
