/**
 * When the Supervisor repairs its indexes (StateStore.reconcilePage): an hourly pass reads every
 * state row until every row carries the state index's marker (then only the in-flight orders),
 * and a daily full pass reads every state row and also checks every order's state index entry. Whether a pass is
 * due comes from when the last pass of its kind started, kept with the pass's cursor, never from
 * the minute a Supervisor run lands in: a schedule on odd minutes, a long run or a pass under way
 * cannot make one be skipped. Pure: the Supervisor reads and saves the record.
 */
export type RepairPass = 'hourly' | 'full';

export interface RepairSchedule {
  /** The UTC hour after which the daily full pass is due; an hourly pass is due after every whole hour. */
  fullHourUtc: number;
}

/** 03:00 UTC: a quiet hour for most shops in Europe and America. */
export const defaultRepairSchedule: RepairSchedule = { fullHourUtc: 3 };

export interface RepairRecord {
  /** The pass under way, if any. */
  underWay?: RepairPass;
  /** When the last hourly pass started. */
  hourlyStartedAt?: Date;
  /** When the last full pass started (it does all an hourly pass does, too). */
  fullStartedAt?: Date;
  /**
   * Every state row carries the state index's marker (StateSince): the last pass that read every
   * row found none without it. An hourly pass then reads only the in-flight orders.
   */
  backfilled?: boolean;
  /** Rows without the marker the pass under way has read (absent: it reads no state rows). */
  legacySeen?: number;
}

/** Where a pass starts: every state row, or (an hourly pass once backfilled) the in-flight orders. */
export function passReads(pass: RepairPass, record: RepairRecord): 'every-row' | 'in-flight' {
  return pass === 'hourly' && record.backfilled === true ? 'in-flight' : 'every-row';
}

/** Carry on the pass under way, start one (a new one replaces any under way), or nothing. */
export type RepairDecision = 'idle' | 'continue' | { start: RepairPass };

const hourMs = 3_600_000;
const dayMs = 24 * hourMs;

/** The latest whole UTC hour at or before `now`. */
export function latestHourlyBoundary(now: Date): Date {
  return new Date(Math.floor(now.getTime() / hourMs) * hourMs);
}

/** The latest `fullHourUtc`:00 UTC at or before `now`. */
export function latestFullBoundary(now: Date, schedule: RepairSchedule): Date {
  const offset = schedule.fullHourUtc * hourMs;
  return new Date(Math.floor((now.getTime() - offset) / dayMs) * dayMs + offset);
}

const before = (at: Date | undefined, boundary: Date): boolean =>
  at === undefined || at.getTime() < boundary.getTime();

/**
 * The pass due at `now` by the schedule, the stronger one when both are: a pass is due when the
 * last one that covers it started before the latest boundary of its kind (a full pass covers an
 * hourly one). Nothing is due without a schedule.
 */
export function duePass(record: RepairRecord, now: Date, schedule?: RepairSchedule): RepairPass | undefined {
  if (!schedule) return undefined;
  if (before(record.fullStartedAt, latestFullBoundary(now, schedule))) return 'full';
  const lastStart = [record.hourlyStartedAt, record.fullStartedAt]
    .filter((d): d is Date => d !== undefined)
    .reduce<Date | undefined>((a, b) => (a === undefined || b > a ? b : a), undefined);
  return before(lastStart, latestHourlyBoundary(now)) ? 'hourly' : undefined;
}

/**
 * What a Supervisor run does about the repair passes. A pass under way goes on; a full pass due
 * (or asked for) while an hourly one is under way replaces it, starting again from the first row,
 * since the full pass does all the hourly one does; an hourly pass due while a full one is under
 * way waits for it to end, and is due at once then if an hour began after the full one started.
 */
export function decideRepair(
  record: RepairRecord,
  now: Date,
  schedule?: RepairSchedule,
  requested?: RepairPass,
): RepairDecision {
  const due = duePass(record, now, schedule);
  const wanted = due === 'full' || requested === 'full' ? 'full' : (due ?? requested);
  if (record.underWay === 'full') return 'continue';
  if (record.underWay === 'hourly') return wanted === 'full' ? { start: 'full' } : 'continue';
  return wanted ? { start: wanted } : 'idle';
}

/** The record once `pass` has started at `now`. */
export function passStarted(record: RepairRecord, pass: RepairPass, now: Date): RepairRecord {
  const { legacySeen: _last, ...rest } = record;
  const counting = passReads(pass, record) === 'every-row' ? { legacySeen: 0 } : {};
  return pass === 'full'
    ? { ...rest, underWay: 'full', fullStartedAt: now, ...counting }
    : { ...rest, underWay: 'hourly', hourlyStartedAt: now, ...counting };
}

/** The record after a page of the pass under way that read `legacy` rows without the marker. */
export function passRead(record: RepairRecord, legacy: number): RepairRecord {
  return record.legacySeen === undefined ? record : { ...record, legacySeen: record.legacySeen + legacy };
}

/**
 * The record once the pass under way has read the whole table. A pass that read every row and
 * found none without the marker ends the backfill; one that found some (a release before the
 * state index still writing) starts it again.
 */
export function passEnded(record: RepairRecord): RepairRecord {
  const { underWay: _ended, legacySeen, ...rest } = record;
  return legacySeen === undefined ? rest : { ...rest, backfilled: legacySeen === 0 };
}
