import { odata, type TableClient, type TransactionAction } from '@azure/data-tables';
import type { HistoryEntry } from '../domain/history.js';
import { httpStatusOf } from '../stateStore/errors.js';
import { historyEntryToRow, historyRowPrefix, rowToHistoryEntry } from '../stateStore/historyRows.js';
import { orderRowKey, rowToOrder, rowToState, rowToStep, stateRowKey, type Row } from '../stateStore/rows.js';
import type { ArchivedOrder } from './archive.js';

/**
 * An order's whole partition in `Orders` as the purge and the hold see it. Two rows belong to
 * retention: `hold` (a legal hold; sorts between the history rows and `order`, so neither an
 * order's load nor its history page reads it) and the tombstone that replaces the `order` row
 * when the order is purged (the submission's create of `order` then fails with 409, which is how a
 * resubmission is recognised without a read on the submission path).
 */
export const holdRowKey = 'hold';

export interface OrderPartition {
  orderRow?: Row;
  stateRow?: Row;
  stepRows: Row[];
  historyRows: Row[];
  holdRow?: Row;
}

export async function readPartition(orders: TableClient, orderId: string): Promise<OrderPartition> {
  const out: OrderPartition = { stepRows: [], historyRows: [] };
  for await (const r of orders.listEntities<Record<string, unknown>>({
    queryOptions: { filter: odata`PartitionKey eq ${orderId}` },
  })) {
    const row = r as unknown as Row;
    if (row.rowKey === orderRowKey) out.orderRow = row;
    else if (row.rowKey === stateRowKey) out.stateRow = row;
    else if (row.rowKey === holdRowKey) out.holdRow = row;
    else if (row.rowKey.startsWith('step:')) out.stepRows.push(row);
    else if (row.rowKey.startsWith(historyRowPrefix)) out.historyRows.push(row);
  }
  return out;
}

export const isTombstone = (row: Row | undefined): boolean => row?.Tombstone === true;

export function sinceOf(row: Row): Date | undefined {
  const v = row.StateSince ?? row.UpdatedAt;
  return v instanceof Date ? v : typeof v === 'string' ? new Date(v) : undefined;
}

/** The archive document of a live partition (order, final state with steps, whole history). */
export function archiveDocument(p: OrderPartition, archivedAt: Date): ArchivedOrder {
  if (!p.orderRow || !p.stateRow) throw new Error('archiveDocument: not a whole order');
  const steps = [...p.stepRows].sort((a, b) => Number(a.Index) - Number(b.Index)).map(rowToStep);
  const order = rowToOrder(p.orderRow);
  const state = rowToState(p.stateRow, steps);
  return {
    orderId: order.orderId,
    archivedAt: archivedAt.toISOString(),
    order: JSON.parse(JSON.stringify(order)) as Record<string, unknown>,
    state: JSON.parse(JSON.stringify({ ...state, stateSince: sinceOf(p.stateRow)?.toISOString() })) as Record<
      string,
      unknown
    >,
    history: p.historyRows.map(
      (r) => JSON.parse(JSON.stringify(rowToHistoryEntry(r))) as Record<string, unknown>,
    ),
  };
}

/** What the tombstone keeps: enough to answer a resubmission and find the archive. */
export function tombstoneRow(p: OrderPartition, purgedAt: Date, blobName: string | undefined) {
  const o = p.orderRow!;
  return {
    partitionKey: o.partitionKey,
    rowKey: orderRowKey,
    Tombstone: true,
    PurgedAt: purgedAt,
    ...(blobName !== undefined ? { ArchiveBlob: blobName } : {}),
    ...(typeof o.RequestHash === 'string' ? { RequestHash: o.RequestHash } : {}),
    ...(typeof o.CallerScope === 'string' ? { CallerScope: o.CallerScope } : {}),
    ...(typeof o.CustomerId === 'string' ? { CustomerId: o.CustomerId } : {}),
  };
}

/** Entity-group transactions hold at most 100 operations. */
export const maxBatch = 100;

/**
 * The purge's fencing write: the state row deleted under the ETag it was judged by (a transaction
 * cannot carry a delete's ETag, so this is one request of its own). False when the order changed
 * since it was read (a resubmit, a hold): nothing was deleted. From here on the order reads as
 * gone (no state row); the marker makes sure the rest follows.
 */
export async function fenceState(orders: TableClient, p: OrderPartition): Promise<boolean> {
  try {
    await orders.deleteEntity(p.stateRow!.partitionKey, stateRowKey, { etag: p.stateRow!.etag });
    return true;
  } catch (e) {
    const status = httpStatusOf(e);
    if (status === 412 || status === 404) return false;
    throw e;
  }
}

/**
 * After the fence: the `order` row becomes the tombstone (once: a tombstone is left as it is) and
 * the steps and the history go, in batches of 100. Safe to run again after a crash.
 */
export async function tombstoneAndClear(
  orders: TableClient,
  orderId: string,
  purgedAt: Date,
  blobName: string | undefined,
): Promise<void> {
  const p = await readPartition(orders, orderId);
  if (p.stateRow) throw new Error(`purge of ${orderId}: the state row is still there`);
  const actions: TransactionAction[] = [];
  if (p.orderRow && !isTombstone(p.orderRow)) {
    actions.push(['update', tombstoneRow(p, purgedAt, blobName), 'Replace']);
  }
  for (const r of [...p.stepRows, ...p.historyRows]) {
    actions.push(['delete', { partitionKey: orderId, rowKey: r.rowKey }]);
  }
  for (let i = 0; i < actions.length; i += maxBatch) {
    const batch = actions.slice(i, i + maxBatch);
    try {
      await orders.submitTransaction(batch);
    } catch (e) {
      if (httpStatusOf(e) !== 404) throw e;
      // A row of the batch went already (a slice that ran this before): one by one.
      for (const a of batch) {
        const entity = a[1] as { partitionKey: string; rowKey: string };
        if (a[0] === 'delete') {
          await orders.deleteEntity(entity.partitionKey, entity.rowKey).catch((err: unknown) => {
            if (httpStatusOf(err) !== 404) throw err;
          });
        } else {
          await orders.updateEntity(a[1], 'Replace');
        }
      }
    }
  }
}

/**
 * Places or lifts a legal hold: the hold row created (or deleted), the history entry, and a touch
 * of the state row under its ETag, in one transaction, so a purge that judged the order before
 * the hold fails its own ETag-guarded delete. 'gone' when there is no order (or it was purged).
 */
export async function writeHold(
  orders: TableClient,
  orderId: string,
  hold: { by: string; at: Date; reason?: string } | null,
  entry: HistoryEntry,
): Promise<'done' | 'gone' | 'already' | 'changed'> {
  let stateEtag: string;
  let held: boolean;
  try {
    const state = await orders.getEntity(orderId, stateRowKey, {
      queryOptions: { select: ['PartitionKey'] },
    });
    stateEtag = state.etag;
  } catch (e) {
    if (httpStatusOf(e) === 404) return 'gone';
    throw e;
  }
  try {
    await orders.getEntity(orderId, holdRowKey);
    held = true;
  } catch (e) {
    if (httpStatusOf(e) !== 404) throw e;
    held = false;
  }
  if (held === (hold !== null)) return 'already';
  const actions: TransactionAction[] = [
    ['update', { partitionKey: orderId, rowKey: stateRowKey }, 'Merge', { etag: stateEtag }],
    hold
      ? [
          'create',
          {
            partitionKey: orderId,
            rowKey: holdRowKey,
            HeldBy: hold.by.slice(0, 200),
            HeldAt: hold.at,
            ...(hold.reason ? { Reason: hold.reason.slice(0, 500) } : {}),
          },
        ]
      : ['delete', { partitionKey: orderId, rowKey: holdRowKey }],
    ['create', historyEntryToRow(orderId, entry)],
  ];
  try {
    await orders.submitTransaction(actions);
    return 'done';
  } catch (e) {
    const status = httpStatusOf(e);
    if (status === 412 || status === 409 || status === 404) return 'changed';
    throw e;
  }
}
