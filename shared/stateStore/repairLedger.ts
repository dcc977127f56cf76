import type { TableClient } from '@azure/data-tables';
import type { RepairPass, RepairRecord } from '../domain/repairPasses.js';
import { httpStatusOf } from './errors.js';
import type { ProcessState } from '../domain/state.js';

/** Where a reconcile pass is (StateStore.reconcilePage); `full` also checks the state index. */
export interface ReconcileCursor {
  /** `live:*`: an hourly pass once backfilled, over the in-flight states' index entries (liveRepair.ts). */
  stage: 'orders' | `entries:${ProcessState}` | `live:${ProcessState}`;
  token?: string;
  full?: boolean;
}

export interface RepairLedgerEntry {
  /** Where the pass under way stopped; null when none is. */
  cursor: ReconcileCursor | null;
  record: RepairRecord;
  /** The row's ETag, absent when there is no row yet. */
  etag?: string;
}

/** The ledger's partition: no order id maps to it, and it has no CheckAfter, so no sweep reads it. */
export const repairLedgerPartition = 'reconcile';
const ledgerRow = { partitionKey: repairLedgerPartition, rowKey: 'cursor' };

type LedgerRow = {
  Stage?: string;
  Token?: string;
  Full?: boolean;
  Idle?: boolean;
  HourlyStartedAt?: Date;
  FullStartedAt?: Date;
  Backfilled?: boolean;
  LegacySeen?: number;
  etag?: string;
};

/**
 * The repair passes' ledger: one row in the in-flight index table holding the cursor of the pass
 * under way and when the last pass of each kind started, so every Supervisor instance, and the
 * next one after a restart, carries on the same pass and agrees on which is due. A row without
 * `Idle` (as releases before the pass times wrote it) is a pass under way.
 */
export class RepairLedger {
  constructor(private readonly table: TableClient) {}

  async read(): Promise<RepairLedgerEntry> {
    let row: LedgerRow;
    try {
      row = await this.table.getEntity<LedgerRow>(ledgerRow.partitionKey, ledgerRow.rowKey);
    } catch (e) {
      if (httpStatusOf(e) === 404) return { cursor: null, record: {} };
      throw e;
    }
    const times: RepairRecord = {
      ...(row.HourlyStartedAt instanceof Date ? { hourlyStartedAt: row.HourlyStartedAt } : {}),
      ...(row.FullStartedAt instanceof Date ? { fullStartedAt: row.FullStartedAt } : {}),
      ...(row.Backfilled === true ? { backfilled: true } : {}),
      ...(typeof row.LegacySeen === 'number' ? { legacySeen: row.LegacySeen } : {}),
    };
    if (row.Idle === true) return { cursor: null, record: times, etag: row.etag };
    const full = row.Full === true;
    const cursor: ReconcileCursor = {
      stage: (typeof row.Stage === 'string' && row.Stage !== ''
        ? row.Stage
        : 'orders') as ReconcileCursor['stage'],
      ...(typeof row.Token === 'string' && row.Token !== '' ? { token: row.Token } : {}),
      ...(full ? { full: true } : {}),
    };
    const underWay: RepairPass = full ? 'full' : 'hourly';
    return { cursor, record: { ...times, underWay }, etag: row.etag };
  }

  /**
   * Records where the pass stopped (null: no pass under way) and the pass times, if the row is
   * still as read (`etag`; none: there was no row). False when another Supervisor changed it in
   * between: its save stands, and this one's slice is simply done again later.
   */
  async save(cursor: ReconcileCursor | null, record: RepairRecord, etag?: string): Promise<boolean> {
    const entity = {
      ...ledgerRow,
      Stage: cursor?.stage ?? '',
      Token: cursor?.token ?? '',
      Full: cursor?.full === true,
      Idle: cursor === null,
      ...(record.hourlyStartedAt ? { HourlyStartedAt: record.hourlyStartedAt } : {}),
      ...(record.fullStartedAt ? { FullStartedAt: record.fullStartedAt } : {}),
      Backfilled: record.backfilled === true,
      ...(record.legacySeen !== undefined ? { LegacySeen: record.legacySeen } : {}),
    };
    try {
      if (etag === undefined) await this.table.createEntity(entity);
      else await this.table.updateEntity(entity, 'Replace', { etag });
      return true;
    } catch (e) {
      const status = httpStatusOf(e);
      if (status === 409 || status === 412 || status === 404) return false;
      throw e;
    }
  }
}
