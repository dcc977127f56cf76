import type { PriceTable } from './pricing.js';

/** What the bench counted per purged order, at the servers (bench/tableProxy.ts, blobProxy.ts). */
export interface PurgeOperations {
  tableTransactions: number;
  blobWrites: number;
  blobReads: number;
  blobLists: number;
}

export interface PurgeCost {
  table: number;
  /** Null when bench/prices.json carries no blob prices. */
  blob: number | null;
  total: number | null;
}

/**
 * Dollars per million purged orders: table transactions, and the archive's blob operations at the
 * Hot tier's prices (the archive writes there; listing is billed at the write rate). Pure.
 */
export function purgeCostPerMillion(perOrder: PurgeOperations, prices: PriceTable): PurgeCost {
  const million = 1e6;
  const table = (perOrder.tableTransactions * million * prices.tableStorage.per10kTransactions.value) / 1e4;
  const b = prices.blobStorage;
  if (!b) return { table, blob: null, total: null };
  const blob =
    ((perOrder.blobWrites + perOrder.blobLists) * million * b.hotWritePer10k.value +
      perOrder.blobReads * million * b.hotReadPer10k.value) /
    1e4;
  return { table, blob, total: table + blob };
}
