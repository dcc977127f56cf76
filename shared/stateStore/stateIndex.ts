import { odata, type TableClient, type TransactionAction } from '@azure/data-tables';
import { processStates, type ProcessState } from '../domain/state.js';
import { httpStatusOf } from './errors.js';
import type { StoreMetrics } from './metrics.js';
import type { Row } from './rows.js';

/**
 * The operator's state index (table `OrderIndex`), so a list page, the counts and the changes
 * feed read what they show and not the Orders table.
 *
 * Partition `state:{ProcessState}` holds, for each order that entered that state at `since`, four
 * entries (one batch, one partition): `t:{inv}:{orderId}` (by time), `c:{customer}:{inv}:{orderId}`
 * (by customer), `v:{version}:{inv}:{orderId}` (by workflow version), `a:{since}:{orderId}` (oldest
 * first, for the oldest in-flight order), where `inv` is
 * 9999999999999 - since in ms, so a range read returns the newest first and a time range is a key
 * range. Entries are written BEFORE the order's transaction (a transition that then fails leaves
 * an entry the order's state row does not confirm) and the previous state's entries are deleted
 * AFTER it (a crash in between leaves one). Readers verify every entry against the order's state
 * row (its ProcessState and StateSince) and delete what it does not confirm: the index can hold
 * extra entries for a while, never miss one (a superset, like the in-flight index).
 *
 * Partition `counts` holds sharded counters `{ProcessState}:{shard}` moved after each state
 * change (see StateCounts below).
 */
export const maxInverted = 9_999_999_999_999;
const shards = 8;
const countsPartition = 'counts';

export interface IndexedOrder {
  orderId: string;
  state: ProcessState;
  since: Date;
  customerId: string;
  workflow: string;
  workflowVersion: number;
}

export interface IndexFilter {
  state: ProcessState;
  customerId?: string;
  workflowVersion?: number;
  /** Entered the state at or after. */
  from?: Date;
  /** Entered the state at or before. */
  to?: Date;
}

export const statePartition = (state: ProcessState): string => `state:${state}`;
const inverted = (at: Date): string => String(maxInverted - at.getTime()).padStart(13, '0');
/** Row keys cannot hold / \ # ? or control characters; encodeURIComponent also escapes ':'. */
const keyPart = (text: string): string =>
  encodeURIComponent(text).replace(/[!'()*~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const versionPart = (v: number): string => String(v).padStart(6, '0');

function prefixOf(f: Omit<IndexFilter, 'state'>): string {
  if (f.customerId !== undefined) return `c:${keyPart(f.customerId)}:`;
  if (f.workflowVersion !== undefined) return `v:${versionPart(f.workflowVersion)}:`;
  return 't:';
}

export function indexRowKeys(o: IndexedOrder): string[] {
  const tail = `${inverted(o.since)}:${o.orderId}`;
  return [`t:${tail}`, `c:${keyPart(o.customerId)}:${tail}`, `v:${versionPart(o.workflowVersion)}:${tail}`];
}

export function indexEntries(o: IndexedOrder): Record<string, unknown>[] {
  return indexRowKeys(o).map((rowKey) => ({
    partitionKey: statePartition(o.state),
    rowKey,
    OrderId: o.orderId,
    ProcessState: o.state,
    Since: o.since,
    CustomerId: o.customerId,
    Workflow: o.workflow,
    WorkflowVersion: o.workflowVersion,
  }));
}

export function rowToIndexed(row: Row): IndexedOrder {
  return {
    orderId: String(row.OrderId),
    state: row.ProcessState as ProcessState,
    since: row.Since instanceof Date ? row.Since : new Date(String(row.Since)),
    customerId: typeof row.CustomerId === 'string' ? row.CustomerId : '',
    workflow: typeof row.Workflow === 'string' ? row.Workflow : '',
    workflowVersion: typeof row.WorkflowVersion === 'number' ? row.WorkflowVersion : 1,
  };
}

export class StateIndex {
  constructor(
    readonly table: TableClient,
    private readonly metrics: StoreMetrics,
  ) {}

  /** Before the order's transaction: the order is listed in its next state from now on. */
  async enter(o: IndexedOrder): Promise<void> {
    const actions: TransactionAction[] = indexEntries(o).map((e) => [
      'upsert',
      e as { partitionKey: string; rowKey: string },
      'Replace',
    ]);
    await this.table.submitTransaction(actions);
  }

  /** After the transaction: the previous state's entries go (best effort; readers repair). */
  async leave(o: IndexedOrder): Promise<void> {
    const partitionKey = statePartition(o.state);
    const actions: TransactionAction[] = indexRowKeys(o).map((rowKey) => [
      'delete',
      { partitionKey, rowKey },
    ]);
    try {
      await this.table.submitTransaction(actions);
    } catch (e) {
      // One entry already gone (a reader repaired it) fails the batch: delete one by one.
      if (httpStatusOf(e) !== 404) throw e;
      await this.removeEach(o);
    }
  }

  /** Deletes an unconfirmed order's entries, ignoring those already gone. */
  async removeEach(o: IndexedOrder): Promise<void> {
    const partitionKey = statePartition(o.state);
    await Promise.all(
      indexRowKeys(o).map((rowKey) =>
        this.table.deleteEntity(partitionKey, rowKey).catch((e: unknown) => {
          if (httpStatusOf(e) !== 404) throw e;
        }),
      ),
    );
  }

  /** One page of entries in key order (newest first), not yet verified. */
  async page(
    filter: IndexFilter,
    maxPageSize: number,
    continuationToken?: string,
  ): Promise<{ rows: IndexedOrder[]; continuationToken?: string }> {
    const prefix = prefixOf(filter);
    const low = filter.to ? `${prefix}${inverted(filter.to)}` : prefix;
    // ';' sorts right after ':', so `${prefix}${inv};` is past every key of that instant.
    const high = filter.from ? `${prefix}${inverted(filter.from)};` : `${prefix.slice(0, -1)};`;
    let query = odata`PartitionKey eq ${statePartition(filter.state)} and RowKey ge ${low} and RowKey lt ${high}`;
    if (filter.customerId !== undefined && filter.workflowVersion !== undefined) {
      // Within one customer's entries of one state: a filtered read of that customer's range.
      query += ` and ${odata`WorkflowVersion eq ${filter.workflowVersion}`}`;
    }
    const pages = this.table
      .listEntities<Record<string, unknown>>({ queryOptions: { filter: query } })
      .byPage({ maxPageSize, continuationToken });
    const { value, done } = await pages.next();
    if (done || !value) return { rows: [] };
    this.metrics.entitiesRead += value.length;
    const rows = value.map((r) => rowToIndexed(r as Row));
    return value.continuationToken ? { rows, continuationToken: value.continuationToken } : { rows };
  }

  /** The entries longest in `state`, oldest first (unverified). */
  async oldest(state: ProcessState, n: number): Promise<IndexedOrder[]> {
    const filter = odata`PartitionKey eq ${statePartition(state)} and RowKey ge ${'a:'} and RowKey lt ${'a;'}`;
    const pages = this.table
      .listEntities<Record<string, unknown>>({ queryOptions: { filter } })
      .byPage({ maxPageSize: n });
    const { value, done } = await pages.next();
    if (done || !value) return [];
    this.metrics.entitiesRead += value.length;
    return value.map((r) => rowToIndexed(r as Row));
  }

  /**
   * Orders that entered any state after `after` (ms), up to `until`: one range read of each
   * state's by-time entries, so it reads O(changes). An order that moved twice shows once, in
   * the state it is in.
   */
  async changedBetween(after: Date, until: Date, limit: number): Promise<IndexedOrder[]> {
    const all = await Promise.all(
      processStates.map(async (state) => {
        const out: IndexedOrder[] = [];
        const filter = odata`PartitionKey eq ${statePartition(state)} and RowKey ge ${`t:${inverted(until)}`} and RowKey lt ${`t:${inverted(after)}`}`;
        for await (const page of this.table
          .listEntities<Record<string, unknown>>({ queryOptions: { filter } })
          .byPage({ maxPageSize: limit })) {
          this.metrics.entitiesRead += page.length;
          out.push(...page.map((r) => rowToIndexed(r as Row)));
          if (out.length >= limit) break;
        }
        return out;
      }),
    );
    return all
      .flat()
      .sort((a, b) => a.since.getTime() - b.since.getTime())
      .slice(0, limit);
  }
}

/**
 * Counts per state as sharded counters: after a state change commits, the old state's counter
 * goes down and the new one's up in one batch on a random shard (ETag-guarded, retried on 412).
 * A reader sums 6 x 8 small rows: O(1), no scan. Consistency: a counter moves only after the
 * transition it counts, so it is never ahead of the orders; a process that dies between the
 * transition and the counter batch leaves the counts off by one for that order (not repaired:
 * rebuilding them means reading the whole index). Counts are shown with `asOf`.
 */
export class StateCounts {
  constructor(
    readonly table: TableClient,
    private readonly metrics: StoreMetrics,
  ) {}

  async move(from: ProcessState | null, to: ProcessState, attempts = 6): Promise<void> {
    const shard = Math.floor(Math.random() * shards);
    const keys = [...(from ? [`${from}:${shard}`] : []), `${to}:${shard}`];
    for (let i = 0; ; i++) {
      const rows = await Promise.all(keys.map((k) => this.get(k)));
      const actions: TransactionAction[] = rows.map((row, j) => {
        const delta = keys[j].startsWith(`${to}:`) ? 1 : -1;
        const entity = { partitionKey: countsPartition, rowKey: keys[j], Count: (row?.count ?? 0) + delta };
        return row ? ['update', entity, 'Replace', { etag: row.etag }] : ['create', entity];
      });
      try {
        await this.table.submitTransaction(actions);
        return;
      } catch (e) {
        const status = httpStatusOf(e);
        if ((status !== 412 && status !== 409) || i + 1 >= attempts) throw e;
      }
    }
  }

  async totals(): Promise<Record<ProcessState, number>> {
    const counts = Object.fromEntries(processStates.map((s) => [s, 0])) as Record<ProcessState, number>;
    const filter = odata`PartitionKey eq ${countsPartition}`;
    for await (const row of this.table.listEntities<Record<string, unknown>>({ queryOptions: { filter } })) {
      this.metrics.entitiesRead += 1;
      const state = String(row.rowKey).split(':')[0] as ProcessState;
      if (state in counts) counts[state] += Number(row.Count ?? 0);
    }
    for (const s of processStates) counts[s] = Math.max(0, counts[s]);
    return counts;
  }

  private async get(rowKey: string): Promise<{ count: number; etag: string } | null> {
    try {
      const row = await this.table.getEntity<Record<string, unknown>>(countsPartition, rowKey);
      this.metrics.entitiesRead += 1;
      return { count: Number(row.Count ?? 0), etag: row.etag };
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      throw e;
    }
  }
}
