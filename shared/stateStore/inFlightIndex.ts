import { odata, type TableClient } from '@azure/data-tables';
import { isTerminal, type ProcessState } from '../domain/state.js';
import { isOverdue } from '../domain/supervision.js';
import { httpStatusOf } from './errors.js';
import type { StoreMetrics } from './metrics.js';
import { stateRowKey, type Row } from './rows.js';
import { RepairLedger, repairLedgerPartition } from './repairLedger.js';

export type { ReconcileCursor } from './repairLedger.js';

/**
 * The in-flight index: a table with one row per order that may be non-terminal, so the
 * Supervisor's sweep reads O(in-flight) rows instead of scanning every order ever placed.
 *
 * It is a SUPERSET of the truth; the state row is always the truth:
 * - a row is written before an order becomes in-flight (before the submission transaction;
 *   before and again after an operator's resubmit, so a concurrent clean-up cannot strand it);
 * - it is removed only after the order is terminal, by deleting with the ETag read BEFORE the
 *   state row was checked: if anyone re-wrote the row in between, the delete fails (412) and the
 *   row stays; on the hot path the ETag is the one the order's own put returned, kept in its
 *   state row, so the finishing save removes the row in one request (`removeAsWritten`);
 * - a submission whose writes were refused parks its row until the end of the grace
 *   (`parkUntilGraceEnds`), so the sweep does not read the missing order on every run;
 * - a row whose order has no state row, or a terminal one, is removed by the sweep only when its
 *   last put (PutAt) is older than the grace: a submission stalled between its put and its
 *   transaction, or a resubmit between its first put and its state write, cannot outlive the host's
 *   functionTimeout, so a younger row may still be about to be needed (and its writer may die before
 *   putting it again);
 * - CheckAfter is a hint of when the order's complete-by may have passed. Scheduler transitions
 *   never touch it; the sweep pushes it forward lazily when it finds the deadline moved.
 *
 * PartitionKey is the order id's first two hex digits: writes spread over 256 partitions; the
 * sweep's filter on CheckAfter reads across them (cost grows with the index, i.e. in-flight).
 */
export interface SweepCandidate {
  orderId: string;
  processState: ProcessState;
  completeBy: Date;
}

export interface SweepResult {
  /** Orders whose complete-by has passed: the Supervisor sends each a TimedOut. */
  timedOut: SweepCandidate[];
  /** Index rows the query returned. */
  examined: number;
  /** Index rows removed because the order is terminal or does not exist (repair). */
  removed: number;
  /** Index rows whose CheckAfter was pushed to the order's current complete-by. */
  deferred: number;
}

type IndexRow = Row & { CheckAfter?: Date; PutAt?: Date };

/**
 * How long the sweep leaves an order that waits (a callback, an operator: the state row's
 * `Waiting`) before reading it again: 4 reads a day instead of one per recheck. Safe because every
 * write that ends a wait with an earlier complete-by puts the index row first (StateStore.save).
 */
export const waitingRecheckSeconds = 6 * 3600;

/** Default grace: host.json's functionTimeout (10 min), the longest a writer can stall. */
export const defaultIndexGraceSeconds = 600;

export class InFlightIndex {
  constructor(
    readonly table: TableClient,
    private readonly orders: TableClient,
    private readonly metrics: StoreMetrics,
    /** How long after its put a row without a live order is still kept (see the header). */
    readonly graceSeconds: number = defaultIndexGraceSeconds,
    /** The longest a row waits before its order is read again (see StateStoreOptions). */
    readonly recheckSeconds: number = Infinity,
  ) {
    this.repairs = new RepairLedger(table);
  }

  /** The repair passes' cursor and times, kept in this table (repairLedger.ts). */
  readonly repairs: RepairLedger;

  /** When the sweep should next read an order whose complete-by is `completeBy`, seen at `now`. */
  checkAfter(completeBy: Date, now: Date): Date {
    return new Date(Math.min(completeBy.getTime(), now.getTime() + this.recheckSeconds * 1000));
  }

  static partitionFor(orderId: string): string {
    return orderId.slice(0, 2);
  }

  /**
   * Adds (or refreshes) an order's row. Upsert is right here: the index is a hint, not state.
   * Returns the row's new ETag, which the state store keeps with the order (see `removeAsWritten`).
   */
  async put(orderId: string, checkAfter: Date, writtenAt: Date = new Date()): Promise<string | undefined> {
    const response = await this.table.upsertEntity(
      {
        partitionKey: InFlightIndex.partitionFor(orderId),
        rowKey: orderId,
        CheckAfter: this.checkAfter(checkAfter, writtenAt),
        PutAt: writtenAt,
      },
      'Replace',
    );
    return response.etag;
  }

  /**
   * A submission whose writes were refused after it put this row: the order most likely does not
   * exist, so the row waits for one look at the end of its grace instead of a 404 on every sweep
   * until then. Not deleted: a refusal that was a timeout may have committed the order. The
   * submitter reads it once at once (a committed order is then not parked); when that read fails
   * too, a look at the state row after the grace tells (a committed order is then supervised).
   * Guarded by the put's ETag, so a concurrent submission of the same order keeps its own
   * CheckAfter.
   * Best effort: a row left as it was is still resolved by the sweep.
   */
  async parkUntilGraceEnds(orderId: string, etag: string | undefined, putAt: Date): Promise<void> {
    if (etag === undefined) return;
    try {
      await this.table.updateEntity(
        {
          partitionKey: InFlightIndex.partitionFor(orderId),
          rowKey: orderId,
          CheckAfter: new Date(putAt.getTime() + this.graceSeconds * 1000),
        },
        'Merge',
        { etag },
      );
    } catch {
      // the sweep reads the row at its CheckAfter as before
    }
  }

  /**
   * Removes a finished order's row in one request when it is still exactly the version this
   * order's own put wrote (`etag`). Any later write of the row (an operator's resubmit, which
   * re-puts the row before the order becomes in-flight again; the sweep moving CheckAfter) changes
   * its ETag, so the delete fails with 412 and the careful path decides: read the row, read the
   * state row, delete only if terminal. Without an ETag only the careful path runs.
   */
  async removeAsWritten(orderId: string, etag: string | undefined): Promise<boolean> {
    if (etag !== undefined) {
      try {
        await this.table.deleteEntity(InFlightIndex.partitionFor(orderId), orderId, { etag });
        return true;
      } catch (e) {
        const status = httpStatusOf(e);
        if (status === 404) return false;
        if (status !== 412) throw e;
      }
    }
    return this.removeIfTerminal(orderId);
  }

  /** Removes the row when the state row says terminal (or is missing). */
  async removeIfTerminal(orderId: string): Promise<boolean> {
    const row = await this.getIndexRow(orderId);
    if (row === null) return false;
    return this.resolve(row, new Date(8.64e15)).then((r) => r === 'removed');
  }

  /**
   * Finds in-flight orders whose complete-by has passed. Reads only index rows with
   * CheckAfter <= now, then each candidate's state row; repairs the index as it goes.
   */
  async sweep(now: Date, options: { pageSize?: number; concurrency?: number } = {}): Promise<SweepResult> {
    const result: SweepResult = { timedOut: [], examined: 0, removed: 0, deferred: 0 };
    const pages = this.table
      .listEntities<Record<string, unknown>>({ queryOptions: { filter: odata`CheckAfter le ${now}` } })
      .byPage({ maxPageSize: options.pageSize ?? 1000 });
    const concurrency = options.concurrency ?? 16;
    for await (const page of pages) {
      result.examined += page.length;
      this.metrics.entitiesRead += page.length;
      for (let i = 0; i < page.length; i += concurrency) {
        const chunk = page.slice(i, i + concurrency) as unknown as IndexRow[];
        const outcomes = await Promise.all(chunk.map((row) => this.resolve(row, now)));
        for (const o of outcomes) {
          if (o === 'removed') result.removed += 1;
          else if (o === 'deferred') result.deferred += 1;
          else if (o !== 'kept') result.timedOut.push(o);
        }
      }
    }
    return result;
  }

  /**
   * How many orders are in flight and since when the oldest has been: one read of every index row
   * (O(in flight), two small columns). A finished order's own write removes its row, so the count
   * includes a finished order only until the sweep repairs a row that write could not remove.
   */
  async summary(): Promise<{ count: number; oldestPutAt: Date | undefined }> {
    let count = 0;
    let oldest: number | undefined;
    const rows = this.table.listEntities<Record<string, unknown>>({
      queryOptions: { filter: odata`PartitionKey ne ${repairLedgerPartition}`, select: ['PutAt'] },
    });
    for await (const row of rows) {
      count += 1;
      this.metrics.entitiesRead += 1;
      const putAt = row.PutAt instanceof Date ? row.PutAt.getTime() : undefined;
      if (putAt !== undefined && (oldest === undefined || putAt < oldest)) oldest = putAt;
    }
    return { count, oldestPutAt: oldest === undefined ? undefined : new Date(oldest) };
  }

  private async resolve(row: IndexRow, now: Date): Promise<SweepCandidate | 'removed' | 'deferred' | 'kept'> {
    const orderId = row.rowKey;
    const state = await this.getStateRow(orderId);
    if (state === null || isTerminal(state.ProcessState as ProcessState)) {
      const putAt = row.PutAt instanceof Date ? row.PutAt.getTime() : -Infinity;
      if (now.getTime() - putAt < this.graceSeconds * 1000) return 'kept';
      // Conditional on the ETag we read before looking at the state row (see the header).
      try {
        await this.table.deleteEntity(row.partitionKey, row.rowKey, { etag: row.etag });
        return 'removed';
      } catch (e) {
        const status = httpStatusOf(e);
        if (status === 404 || status === 412) return 'kept';
        throw e;
      }
    }
    const completeBy = state.CompleteBy instanceof Date ? state.CompleteBy : null;
    if (completeBy === null) return 'kept';
    if (isOverdue(completeBy, now)) {
      return { orderId, processState: state.ProcessState as ProcessState, completeBy };
    }
    try {
      await this.table.updateEntity(
        {
          partitionKey: row.partitionKey,
          rowKey: row.rowKey,
          CheckAfter:
            state.Waiting === true
              ? new Date(Math.min(completeBy.getTime(), now.getTime() + waitingRecheckSeconds * 1000))
              : this.checkAfter(completeBy, now),
        },
        'Merge',
        { etag: row.etag },
      );
    } catch (e) {
      const status = httpStatusOf(e);
      if (status !== 404 && status !== 412) throw e;
    }
    return 'deferred';
  }

  /**
   * Repair for the other direction: a non-terminal order whose index row was lost (a deleted
   * table, a bug, a manual edit) gets it back. Called with the state rows of one page of the
   * reconcile pass (StateStore.reconcilePage), which reads the whole Orders table: O(history), so
   * it runs rarely, never on the hot path. Returns how many rows it re-created.
   */
  async recreateMissing(stateRows: Row[]): Promise<number> {
    let recreated = 0;
    for (const row of stateRows) {
      if (isTerminal(row.ProcessState as ProcessState)) continue;
      if ((await this.getIndexRow(row.partitionKey)) === null) {
        const completeBy = row.CompleteBy instanceof Date ? row.CompleteBy : new Date();
        await this.put(row.partitionKey, completeBy);
        recreated += 1;
      }
    }
    return recreated;
  }

  private async getIndexRow(orderId: string): Promise<IndexRow | null> {
    try {
      const row = await this.table.getEntity<Record<string, unknown>>(
        InFlightIndex.partitionFor(orderId),
        orderId,
      );
      this.metrics.entitiesRead += 1;
      return row as IndexRow;
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      throw e;
    }
  }

  private async getStateRow(orderId: string): Promise<Row | null> {
    try {
      const row = await this.orders.getEntity<Record<string, unknown>>(orderId, stateRowKey, {
        queryOptions: { select: ['ProcessState', 'CompleteBy', 'Waiting'] },
      });
      this.metrics.entitiesRead += 1;
      return row as Row;
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      throw e;
    }
  }
}
