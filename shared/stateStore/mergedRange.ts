import { odata, type TableClient } from '@azure/data-tables';
import type { StoreMetrics } from './metrics.js';
import type { Row } from './rows.js';

/**
 * One key range read across several partitions whose entries share one key order (the state
 * index's partitions of a state), merged into that order: the first `n` keys of the union.
 *
 * Each partition is first asked for about its share (n / partitions + 1); a partition whose share
 * runs out before the merge is done is asked again for twice as many. So a page reads O(n +
 * partitions) entities in one query per partition plus a few refills, never n per partition.
 */
export interface KeyRange {
  /** Lowest RowKey, inclusive unless `after` is set. */
  low: string;
  /** Resume strictly after this RowKey (a previous merged page's last key); replaces `low` when higher. */
  after?: string;
  /** Highest RowKey, exclusive. */
  high: string;
  /** An extra OData condition (already escaped). */
  where?: string;
}

interface Cursor {
  partitionKey: string;
  buffer: Row[];
  token?: string;
  exhausted: boolean;
  ask: number;
}

export async function mergedRange(
  table: TableClient,
  metrics: StoreMetrics,
  partitions: string[],
  range: KeyRange,
  n: number,
): Promise<{ rows: Row[]; more: boolean }> {
  const lowOp = range.after !== undefined && range.after >= range.low ? 'gt' : 'ge';
  const low = lowOp === 'gt' ? range.after! : range.low;
  const share = Math.min(n, Math.ceil(n / partitions.length) + 1);
  const cursors: Cursor[] = partitions.map((partitionKey) => ({
    partitionKey,
    buffer: [],
    exhausted: false,
    ask: share,
  }));

  const fill = async (c: Cursor): Promise<void> => {
    let filter =
      lowOp === 'gt'
        ? odata`PartitionKey eq ${c.partitionKey} and RowKey gt ${low} and RowKey lt ${range.high}`
        : odata`PartitionKey eq ${c.partitionKey} and RowKey ge ${low} and RowKey lt ${range.high}`;
    if (range.where) filter += ` and ${range.where}`;
    // A page may come back short or empty with a token (Table Storage's limits): ask again.
    while (c.buffer.length === 0 && !c.exhausted) {
      const pages = table
        .listEntities<Record<string, unknown>>({ queryOptions: { filter } })
        .byPage({ maxPageSize: c.ask, ...(c.token ? { continuationToken: c.token } : {}) });
      const { value, done } = await pages.next();
      const rows = done || !value ? [] : (value as unknown as Row[]);
      metrics.entitiesRead += rows.length;
      c.buffer.push(...rows);
      c.token = !done && value ? value.continuationToken : undefined;
      if (!c.token) c.exhausted = true;
      c.ask = Math.min(1000, c.ask * 2);
    }
  };

  await Promise.all(cursors.map(fill));
  const rows: Row[] = [];
  let last: string | undefined;
  for (;;) {
    if (rows.length >= n) return { rows, more: cursors.some((c) => c.buffer.length > 0 || !c.exhausted) };
    // A key may be emitted only when every partition that may hold a lower one has shown its next.
    const empty = cursors.filter((c) => c.buffer.length === 0 && !c.exhausted);
    if (empty.length > 0) await Promise.all(empty.map(fill));
    let next: Cursor | undefined;
    for (const c of cursors) {
      if (c.buffer.length === 0) continue;
      if (!next || c.buffer[0].rowKey < next.buffer[0].rowKey) next = c;
    }
    if (!next) return { rows, more: false };
    const row = next.buffer.shift()!;
    // The same entry in two layouts (a move under way) has the same key: list it once.
    if (row.rowKey === last) continue;
    rows.push(row);
    last = row.rowKey;
  }
}

/** The token of a merged page: where the next one resumes (after this key). */
export function mergedToken(lastKey: string): string {
  return Buffer.from(JSON.stringify({ nextPartitionKey: 'merged', nextRowKey: lastKey })).toString('base64');
}

/**
 * Where a token resumes. A merged page's token resumes after its key; a token of the table SDK from
 * before the spread (one partition; its next key) resumes at that key.
 */
export function resumeFrom(token: string | undefined): { after?: string; at?: string } {
  if (token === undefined) return {};
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as {
      nextPartitionKey?: unknown;
      nextRowKey?: unknown;
    };
    if (typeof parsed.nextRowKey !== 'string') return {};
    return parsed.nextPartitionKey === 'merged' ? { after: parsed.nextRowKey } : { at: parsed.nextRowKey };
  } catch {
    return {};
  }
}
