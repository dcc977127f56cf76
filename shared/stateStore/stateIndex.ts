import { randomInt } from 'node:crypto';
import { odata, type TableClient, type TransactionAction } from '@azure/data-tables';
import { processStates, type ProcessState } from '../domain/state.js';
import { httpStatusOf } from './errors.js';
import type { StoreMetrics } from './metrics.js';
import type { Row } from './rows.js';

/**
 * The operator's state index (table `OrderIndex`), so a list page, the counts and the changes
 * feed read what they show and not the Orders table.
 *
 * Partition `state:{ProcessState}` holds, for each order that entered that state at `since`, a
 * group of four entries: `t:{inv}:{orderId}` (by time), `c:{customer}:{inv}:{orderId}` (by
 * customer), `v:{version}:{inv}:{orderId}` (by workflow version) and `a:{since}:{orderId}` (oldest
 * first, for the oldest in-flight order), where `inv` is 9999999999999 - since in ms, so a range
 * read returns the newest first and a time range is a key range. The same partition holds the
 * state's counters `n:{shard}`: a group is created or deleted in ONE batch with a move of one
 * counter shard, so the counts are always exactly the number of groups in the index (the `a:`
 * entry, created with `create`, is the guard: a group is never counted twice).
 *
 * A group is entered BEFORE the order's transaction (a transition that then fails leaves a group
 * the order's state row does not confirm) and the previous state's group is deleted AFTER it (a
 * crash in between leaves one). Readers verify every entry against the order's state row (its
 * ProcessState and StateSince) and delete what it does not confirm; the reconcile pass
 * (StateStore.reconcilePage) re-enters groups that are missing and deletes the unconfirmed ones
 * nobody reads. So the index, and with it the counts, is a superset of the truth that converges
 * to it: never missing an order, over-counting only what a failed write left behind.
 */
export const maxInverted = 9_999_999_999_999;
const countShards = 16;
const counterKey = (shard: number): string => `n:${String(shard).padStart(2, '0')}`;

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

/** The guard entry of an order's group: present iff the group is counted. */
export const guardRowKey = (o: Pick<IndexedOrder, 'since' | 'orderId'>): string =>
  `a:${String(o.since.getTime()).padStart(13, '0')}:${o.orderId}`;

/** The group's entries, the guard `a:` last. */
export function indexRowKeys(o: IndexedOrder): string[] {
  const tail = `${inverted(o.since)}:${o.orderId}`;
  return [
    `t:${tail}`,
    `c:${keyPart(o.customerId)}:${tail}`,
    `v:${versionPart(o.workflowVersion)}:${tail}`,
    guardRowKey(o),
  ];
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
  /** Each counter shard as this process last wrote it. */
  private readonly known = new Map<string, { count: number; etag: string }>();
  /** Shards a move of this process is writing now. */
  private readonly busy = new Set<string>();

  constructor(
    readonly table: TableClient,
    private readonly metrics: StoreMetrics,
  ) {}

  /** Before the order's transaction: the order is listed (and counted) in its next state from now on. */
  async enter(o: IndexedOrder): Promise<void> {
    await this.move(o, 1);
  }

  /**
   * After the transaction, and when a reader or the reconcile finds a group unconfirmed: the group
   * goes and its state's count goes down with it. True when this call removed it.
   */
  async leave(o: IndexedOrder): Promise<boolean> {
    return this.move(o, -1);
  }

  /** Whether the order's group for this state and time is in the index (one point read). */
  async has(o: Pick<IndexedOrder, 'state' | 'since' | 'orderId'>): Promise<boolean> {
    try {
      await this.table.getEntity(statePartition(o.state), guardRowKey(o), {
        queryOptions: { select: ['PartitionKey'] },
      });
      this.metrics.entitiesRead += 1;
      return true;
    } catch (e) {
      if (httpStatusOf(e) === 404) return false;
      throw e;
    }
  }

  /** Orders per state: the counter shards of each state partition (6 small range reads). */
  async totals(): Promise<Record<ProcessState, number>> {
    const counts = Object.fromEntries(processStates.map((s) => [s, 0])) as Record<ProcessState, number>;
    await Promise.all(
      processStates.map(async (state) => {
        const filter = odata`PartitionKey eq ${statePartition(state)} and RowKey ge ${'n:'} and RowKey lt ${'n;'}`;
        for await (const row of this.table.listEntities<Record<string, unknown>>({
          queryOptions: { filter },
        })) {
          this.metrics.entitiesRead += 1;
          counts[state] += Number(row.Count ?? 0);
        }
      }),
    );
    return counts;
  }

  /**
   * Creates (+1) or deletes (-1) the order's group and moves one counter shard, in one batch of
   * one partition. The counter is ETag-guarded. This process keeps the ETag and value its own last
   * write of each shard returned, and picks a shard none of its own moves is using, so on one
   * instance a move is one request; a shard another instance wrote since fails with 412 and is
   * read again. A batch refused because the group is already there (+1) or already gone (-1) means
   * another writer did it: nothing to do, nothing counted twice.
   */
  private async move(o: IndexedOrder, delta: 1 | -1, attempts = 12): Promise<boolean> {
    const partitionKey = statePartition(o.state);
    let partial = false;
    for (let i = 0; ; i++) {
      const shard = this.freeShard(partitionKey);
      const key = `${partitionKey}|${shard}`;
      this.busy.add(key);
      try {
        const counter = this.known.get(key) ?? (await this.counter(partitionKey, shard));
        const entries: TransactionAction[] =
          delta > 0
            ? indexEntries(o).map((e) => {
                const entity = e as { partitionKey: string; rowKey: string };
                // The guard is created (409 when the group exists); the others may replace a
                // leftover of a group whose guard is gone.
                return entity.rowKey.startsWith('a:') ? ['create', entity] : ['upsert', entity, 'Replace'];
              })
            : (partial ? [guardRowKey(o)] : indexRowKeys(o)).map((rowKey) => [
                'delete',
                { partitionKey, rowKey },
              ]);
        const count = { partitionKey, rowKey: counterKey(shard), Count: (counter?.count ?? 0) + delta };
        const countAction: TransactionAction = counter
          ? ['update', count, 'Replace', { etag: counter.etag }]
          : ['create', count];
        try {
          const response = await this.table.submitTransaction([...entries, countAction]);
          const etag = response.subResponses[entries.length]?.etag;
          if (etag) this.known.set(key, { count: count.Count, etag });
          else this.known.delete(key);
        } catch (e) {
          this.known.delete(key);
          throw e;
        }
        if (partial) await this.removeUncounted(o);
        return true;
      } catch (e) {
        const status = httpStatusOf(e);
        if (status !== 404 && status !== 409 && status !== 412) throw e;
        const present = await this.has(o);
        if (delta > 0 && present) return false;
        if (delta < 0 && !present) {
          // Uncounted leftovers (entries without their guard) go one by one.
          await this.removeUncounted(o);
          return false;
        }
        // An entry of a counted group is missing: the guard and the counter alone, then the rest.
        if (delta < 0 && status === 404) partial = true;
        if (i + 1 >= attempts) throw e;
        await new Promise((r) => setTimeout(r, Math.random() * 10 * (i + 1)));
      } finally {
        this.busy.delete(key);
      }
    }
  }

  /**
   * A counter shard of the partition that no move of this process is writing: one whose ETag this
   * process holds if there is one (no read), else any; random if all are busy. A shard another
   * instance wrote since is dropped from what this process holds (412), so instances drift apart.
   */
  private freeShard(partitionKey: string): number {
    const start = randomInt(countShards);
    let free: number | undefined;
    for (let k = 0; k < countShards; k++) {
      const shard = (start + k) % countShards;
      const key = `${partitionKey}|${shard}`;
      if (this.busy.has(key)) continue;
      if (this.known.has(key)) return shard;
      free ??= shard;
    }
    return free ?? start;
  }

  private async removeUncounted(o: IndexedOrder): Promise<void> {
    const partitionKey = statePartition(o.state);
    await Promise.all(
      indexRowKeys(o).map((rowKey) =>
        this.table.deleteEntity(partitionKey, rowKey).catch((e: unknown) => {
          if (httpStatusOf(e) !== 404) throw e;
        }),
      ),
    );
  }

  private async counter(
    partitionKey: string,
    shard: number,
  ): Promise<{ count: number; etag: string } | null> {
    try {
      const row = await this.table.getEntity<Record<string, unknown>>(partitionKey, counterKey(shard));
      this.metrics.entitiesRead += 1;
      return { count: Number(row.Count ?? 0), etag: row.etag };
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      throw e;
    }
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
