import { odata, type TableClient } from '@azure/data-tables';
import { httpStatusOf } from '../stateStore/errors.js';
import { rowToIndexed, type IndexedOrder } from '../stateStore/stateIndex.js';
import type { Row } from '../stateStore/rows.js';

/**
 * The purge's own rows (table `Retention`), each found by key, never by a scan:
 * - `purging` / {orderId}: the marker of a purge under way, written after the order is archived
 *   and before anything of it is deleted; the next slice finishes or undoes what it names.
 * - `tomb:{yyyy-mm-dd}` / {orderId}: the tombstones written that day, so they expire by day.
 * - `held` / {orderId}: the held orders (written before a hold, removed after a release: a
 *   superset, each checked against the order's own hold row when read).
 * - `status` / `purge`: the last slice's figures, for the console.
 */
export const markerPartition = 'purging';
export const heldPartition = 'held';
export const tombPartition = (day: string): string => `tomb:${day}`;

export interface PurgeStatus {
  lastRunAt?: Date;
  lastPurged?: number;
  lastPurgedAt?: Date;
  lastKeptHeld?: number;
  lastError?: string;
}

const ignore404 = (e: unknown): void => {
  if (httpStatusOf(e) !== 404) throw e;
};
const ignore409 = (e: unknown): void => {
  if (httpStatusOf(e) !== 409) throw e;
};

export class RetentionTable {
  constructor(readonly table: TableClient) {}

  async putMarker(entry: IndexedOrder, blobName: string | undefined): Promise<void> {
    await this.table
      .createEntity({
        partitionKey: markerPartition,
        rowKey: entry.orderId,
        OrderId: entry.orderId,
        ProcessState: entry.state,
        Since: entry.since,
        CustomerId: entry.customerId,
        Workflow: entry.workflow,
        WorkflowVersion: entry.workflowVersion,
        ...(entry.partition !== undefined ? { Partition: entry.partition } : {}),
        ...(blobName !== undefined ? { BlobName: blobName } : {}),
      })
      .catch(ignore409);
  }

  async markers(n: number): Promise<{ entry: IndexedOrder; blobName?: string }[]> {
    const out: { entry: IndexedOrder; blobName?: string }[] = [];
    const pages = this.table
      .listEntities<Record<string, unknown>>({
        queryOptions: { filter: odata`PartitionKey eq ${markerPartition}` },
      })
      .byPage({ maxPageSize: n });
    const { value, done } = await pages.next();
    for (const row of done || !value ? [] : value) {
      const r = row as unknown as Row;
      const entry = rowToIndexed(r);
      entry.partition = typeof r.Partition === 'string' ? r.Partition : undefined;
      if (entry.partition === undefined) delete entry.partition;
      out.push({ entry, ...(typeof r.BlobName === 'string' ? { blobName: r.BlobName } : {}) });
    }
    return out;
  }

  /** The marker of the order's purge under way (a point read), or null. */
  async marker(orderId: string): Promise<{ since: Date; blobName?: string } | null> {
    try {
      const r = await this.table.getEntity<Record<string, unknown>>(markerPartition, orderId);
      const at = r.timestamp;
      return {
        since: typeof at === 'string' ? new Date(at) : new Date(),
        ...(typeof r.BlobName === 'string' ? { blobName: r.BlobName } : {}),
      };
    } catch (e) {
      ignore404(e);
      return null;
    }
  }

  async deleteMarker(orderId: string): Promise<void> {
    await this.table.deleteEntity(markerPartition, orderId).catch(ignore404);
  }

  async putTombstoneDay(day: string, orderId: string): Promise<void> {
    await this.table.upsertEntity({ partitionKey: tombPartition(day), rowKey: orderId }, 'Replace');
  }

  /** Tombstone list rows of days before `beforeDay`, oldest first, at most n. */
  async tombstonesBefore(beforeDay: string, n: number): Promise<{ day: string; orderId: string }[]> {
    const pages = this.table
      .listEntities({
        queryOptions: {
          filter: odata`PartitionKey ge ${'tomb:'} and PartitionKey lt ${tombPartition(beforeDay)}`,
          select: ['PartitionKey', 'RowKey'],
        },
      })
      .byPage({ maxPageSize: n });
    const { value, done } = await pages.next();
    return (done || !value ? [] : value).map((r) => ({
      day: String(r.partitionKey).slice('tomb:'.length),
      orderId: String(r.rowKey),
    }));
  }

  async deleteTombstoneDay(day: string, orderId: string): Promise<void> {
    await this.table.deleteEntity(tombPartition(day), orderId).catch(ignore404);
  }

  async putHeld(orderId: string): Promise<void> {
    await this.table.upsertEntity({ partitionKey: heldPartition, rowKey: orderId }, 'Replace');
  }

  async deleteHeld(orderId: string): Promise<void> {
    await this.table.deleteEntity(heldPartition, orderId).catch(ignore404);
  }

  async heldIds(n: number): Promise<string[]> {
    const pages = this.table
      .listEntities({
        queryOptions: { filter: odata`PartitionKey eq ${heldPartition}`, select: ['RowKey'] },
      })
      .byPage({ maxPageSize: n });
    const { value, done } = await pages.next();
    return (done || !value ? [] : value).map((r) => String(r.rowKey));
  }

  async saveStatus(status: PurgeStatus): Promise<void> {
    const props: Record<string, unknown> = {};
    if (status.lastRunAt) props.LastRunAt = status.lastRunAt;
    if (status.lastPurged !== undefined) props.LastPurged = status.lastPurged;
    if (status.lastPurgedAt) props.LastPurgedAt = status.lastPurgedAt;
    if (status.lastKeptHeld !== undefined) props.LastKeptHeld = status.lastKeptHeld;
    props.LastError = status.lastError ?? '';
    await this.table.upsertEntity({ partitionKey: 'status', rowKey: 'purge', ...props }, 'Merge');
  }

  async status(): Promise<PurgeStatus> {
    try {
      const r = await this.table.getEntity<Record<string, unknown>>('status', 'purge');
      const date = (v: unknown) => (v instanceof Date ? v : typeof v === 'string' ? new Date(v) : undefined);
      const out: PurgeStatus = {};
      const lastRunAt = date(r.LastRunAt);
      if (lastRunAt) out.lastRunAt = lastRunAt;
      if (typeof r.LastPurged === 'number') out.lastPurged = r.LastPurged;
      const lastPurgedAt = date(r.LastPurgedAt);
      if (lastPurgedAt) out.lastPurgedAt = lastPurgedAt;
      if (typeof r.LastKeptHeld === 'number') out.lastKeptHeld = r.LastKeptHeld;
      if (typeof r.LastError === 'string' && r.LastError !== '') out.lastError = r.LastError;
      return out;
    } catch (e) {
      ignore404(e);
      return {};
    }
  }
}

export { ignore404, ignore409 };
