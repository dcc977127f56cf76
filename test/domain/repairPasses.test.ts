import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  decideRepair,
  defaultRepairSchedule,
  latestFullBoundary,
  passEnded,
  passRead,
  passReads,
  passStarted,
  type RepairPass,
  type RepairRecord,
} from '../../shared/domain/index.js';

const schedule = defaultRepairSchedule;
const hour = 3_600_000;
const t = (iso: string) => new Date(iso);

test('the issue: a full pass due while an hourly one is under way replaces it', () => {
  const hourlyUnderWay: RepairRecord = {
    underWay: 'hourly',
    hourlyStartedAt: t('2030-01-02T02:00:05Z'),
    fullStartedAt: t('2030-01-01T03:00:05Z'),
  };
  assert.equal(decideRepair(hourlyUnderWay, t('2030-01-02T02:59:59Z'), schedule), 'continue');
  assert.deepEqual(decideRepair(hourlyUnderWay, t('2030-01-02T03:00:30Z'), schedule), { start: 'full' });
  // Any later minute too: due is not "minute 0".
  assert.deepEqual(decideRepair(hourlyUnderWay, t('2030-01-02T03:47:12Z'), schedule), { start: 'full' });
});

test('due on any minute, once per boundary; nothing without a schedule unless asked', () => {
  const done: RepairRecord = {
    hourlyStartedAt: t('2030-01-02T05:01:00Z'),
    fullStartedAt: t('2030-01-02T03:01:00Z'),
  };
  assert.equal(decideRepair(done, t('2030-01-02T05:59:00Z'), schedule), 'idle');
  assert.deepEqual(decideRepair(done, t('2030-01-02T06:01:00Z'), schedule), { start: 'hourly' });
  assert.deepEqual(decideRepair({}, t('2030-01-02T06:01:00Z'), schedule), { start: 'full' }, 'never ran');
  assert.equal(decideRepair({}, t('2030-01-02T06:01:00Z')), 'idle');
  assert.deepEqual(decideRepair({}, t('2030-01-02T06:01:00Z'), undefined, 'hourly'), { start: 'hourly' });
  assert.equal(decideRepair({ underWay: 'full' }, t('2030-01-02T06:01:00Z'), schedule, 'full'), 'continue');
  assert.equal(
    latestFullBoundary(t('2030-01-02T02:59:59Z'), schedule).toISOString(),
    '2030-01-01T03:00:00.000Z',
  );
});

/** Supervisor runs at arbitrary times; each pass takes 1 to 4 runs; the passes a simulation started. */
const runs = fc.record({
  start: fc.integer({ min: 0, max: 400 * 24 }).map((h) => Date.UTC(2030, 0, 1) + h * hour),
  gaps: fc.array(fc.integer({ min: 1, max: 3 * 3600 }), { minLength: 20, maxLength: 200 }),
  lengths: fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 20 }),
  initial: fc.record(
    {
      underWay: fc.constantFrom<RepairPass>('hourly', 'full'),
      hourlyAgo: fc.integer({ min: 1, max: 48 * 3600 }),
      fullAgo: fc.integer({ min: 1, max: 72 * 3600 }),
    },
    { requiredKeys: [] },
  ),
});
const maxLength = 4;
type Runs = typeof runs extends fc.Arbitrary<infer T> ? T : never;

function simulate(r: Runs) {
  let record: RepairRecord = {
    ...(r.initial.underWay ? { underWay: r.initial.underWay } : {}),
    ...(r.initial.hourlyAgo ? { hourlyStartedAt: new Date(r.start - r.initial.hourlyAgo * 1000) } : {}),
    ...(r.initial.fullAgo ? { fullStartedAt: new Date(r.start - r.initial.fullAgo * 1000) } : {}),
  };
  let left = record.underWay ? r.lengths[0] : 0;
  const times: number[] = [];
  const starts: Array<{ run: number; at: number; pass: RepairPass }> = [];
  let now = r.start;
  for (const [i, gap] of r.gaps.entries()) {
    now += gap * 1000;
    times.push(now);
    const d = decideRepair(record, new Date(now), schedule);
    if (record.underWay) assert.notEqual(d, 'idle', 'a pass under way is never dropped');
    if (record.underWay === 'full') assert.equal(d, 'continue', 'a full pass is never restarted');
    if (d === 'idle') continue;
    if (d !== 'continue') {
      record = passStarted(record, d.start, new Date(now));
      starts.push({ run: i, at: now, pass: d.start });
      left = r.lengths[starts.length % r.lengths.length];
    }
    left -= 1;
    if (left <= 0) record = passEnded(record);
  }
  return { times, starts };
}

test('every boundary crossed is followed by a start of its pass within a pass length, on any schedule', () => {
  fc.assert(
    fc.property(runs, (r) => {
      const { times, starts } = simulate(r);
      const last = times.at(-1)!;
      for (let b = Math.ceil(r.start / hour) * hour; b <= last; b += hour) {
        const j = times.findIndex((x) => x >= b);
        if (j + maxLength >= times.length) break;
        const full = new Date(b).getUTCHours() === schedule.fullHourUtc;
        const covering = starts.filter(
          (s) => s.run >= j && s.run <= j + maxLength && (!full || s.pass === 'full'),
        );
        assert.ok(
          covering.length > 0,
          `no ${full ? 'full' : ''} pass started after ${new Date(b).toISOString()}`,
        );
      }
    }),
    { numRuns: 2000 },
  );
});

test('no pass is started twice for one boundary: one hourly start per hour, one full start per day', () => {
  fc.assert(
    fc.property(runs, (r) => {
      const { starts } = simulate(r);
      const perHour = new Map<number, number>();
      const perDay = new Map<number, number>();
      for (const s of starts) {
        if (s.pass === 'hourly') {
          const h = Math.floor(s.at / hour);
          perHour.set(h, (perHour.get(h) ?? 0) + 1);
        } else {
          const d = latestFullBoundary(new Date(s.at), schedule).getTime();
          perDay.set(d, (perDay.get(d) ?? 0) + 1);
        }
      }
      assert.ok(
        [...perHour.values()].every((n) => n === 1),
        JSON.stringify([...perHour]),
      );
      assert.ok(
        [...perDay.values()].every((n) => n === 1),
        JSON.stringify([...perDay]),
      );
    }),
    { numRuns: 2000 },
  );
});

test('the backfill: passes read every row until one that did found none without the marker; then hourly passes read the in-flight orders only', () => {
  const now = t('2030-01-02T05:00:10Z');
  assert.equal(passReads('hourly', {}), 'every-row');
  assert.equal(passReads('full', { backfilled: true }), 'every-row', 'the full pass always reads every row');
  assert.equal(passReads('hourly', { backfilled: true }), 'in-flight');
  // A pass that saw a row without the marker: not backfilled yet.
  let r = passRead(passStarted({}, 'hourly', now), 2);
  r = passEnded(passRead(r, 0));
  assert.equal(r.backfilled, false);
  assert.equal(r.legacySeen, undefined, 'the count belongs to the pass under way');
  // The next one sees none: done.
  r = passEnded(passRead(passStarted(r, 'hourly', now), 0));
  assert.equal(r.backfilled, true);
  // An in-flight pass counts nothing and leaves the flag as it was.
  const live = passStarted(r, 'hourly', now);
  assert.equal(live.legacySeen, undefined);
  assert.equal(passEnded(passRead(live, 5)).backfilled, true);
  // A full pass that finds one again starts the backfill again.
  assert.equal(passEnded(passRead(passStarted(r, 'full', now), 1)).backfilled, false);
});
