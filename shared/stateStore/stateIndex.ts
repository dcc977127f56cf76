import { randomInt } from 'node:crypto';
import { odata, type TableClient, type TransactionAction } from '@azure/data-tables';
import { processStates, type ProcessState } from '../domain/state.js';
import { httpStatusOf } from './errors.js';
import type { StoreMetrics } from './metrics.js';
import { statePartitionKeys, type IndexLayout } from './indexLayout.js';
import { mergedRange, mergedToken, resumeFrom } from './mergedRange.js';
import type { Row } from './rows.js';

/**
 * The operator's state index (table `OrderIndex`), so a list page, the counts and the changes
 * feed read what they show and not the Orders table.
 *
 * Each state's entries are spread over P partitions `state:{ProcessState}:{p}`, p chosen from the
 * order id (indexLayout.ts; P = 1 is the single `state:{ProcessState}`). A partition holds, for each
 * of its orders that entered that state at `since`, a group of four entries: `t:{inv}:{orderId}`
 * (by time), `c:{customer}:{inv}:{orderId}` (by customer), `v:{version}:{inv}:{orderId}` (by
 * workflow version) and `a:{since}:{orderId}` (oldest first), where `inv` is 9999999999999 - since
 * in ms, so a range read returns the newest first and a time range is a key range. Readers merge
 * the partitions in key order (mergedRange.ts). The same partition holds counters `n:{shard}`: a
 * group is created or deleted in ONE batch with a move of one counter shard of its partition, so
 * the counts are always exactly the number of groups in the index (the `a:` entry, created with
 * `create`, is the guard: a group is never counted twice).
 *
 * A group is entered BEFORE the order's transaction and the previous state's group is deleted
 * AFTER it; a writer whose transaction loses its race (412, 409) takes its group back (StateStore),
 * so only a writer that died leaves a group the order's state row does not confirm. Readers verify
 * every entry against the order's state row (its ProcessState and StateSince) and delete what it
 * does not confirm; the reconcile pass (StateStore.reconcilePage) re-enters groups that are missing
 * and deletes the unconfirmed ones nobody reads. So the index, and with it the counts, is a
 * superset of the truth: never missing an order, over-counting only what a dead writer left.
 */
export const maxInverted = 9_999_999_999_999;
/**
 * Counter shards per partition: 16, whatever P. Raising P matters when the partitions bind, and
 * then each partition carries the same moves per second at any P (the state's total grows with
 * P), so its shards must not fall as P rises: with 16 a state spread over P (8 a partition at
 * P = 2), each shard took twice the moves per second at P = 2 and the throttled simulation measured
 * more counter conflicts (412) per order at P = 2 than at P = 1. Readers pay for it only in
 * entities (totals: one query per partition either way, 16 counters each). Readers sum whatever
 * shards exist, so any count is compatible.
 */
export const countShards = 16;
const counterKey = (shard: number): string => `n:${String(shard).padStart(2, '0')}`;

export interface IndexedOrder {
  orderId: string;
  state: ProcessState;
  since: Date;
  customerId: string;
  workflow: string;
  workflowVersion: number;
  /** The partition the entry was read from (absent: where the current layout puts it). */
  partition?: string;
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

/**
 * The filter with its dates inside the time key's range (1970 to 2286, 13 digits): a bound outside
 * it is no bound (from before 1970, to after 2286), or selects nothing (to before 1970, from after
 * 2286), so a date never wraps around the key. Null when nothing can match.
 */
function inKeyRange(filter: IndexFilter): IndexFilter | null {
  const { from, to, ...rest } = filter;
  if (to !== undefined && to.getTime() < 0) return null;
  if (from !== undefined && from.getTime() > maxInverted) return null;
  return {
    ...rest,
    ...(from !== undefined && from.getTime() >= 0 ? { from } : {}),
    ...(to !== undefined && to.getTime() <= maxInverted ? { to } : {}),
  };
}

/** The guard entry of an order's group: present iff the group is counted. */
const msKey = (ms: number): string => String(ms).padStart(13, '0');
export const guardRowKey = (o: Pick<IndexedOrder, 'since' | 'orderId'>): string =>
  `a:${msKey(o.since.getTime())}:${o.orderId}`;

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

export function indexEntries(o: IndexedOrder, partitionKey: string): Record<string, unknown>[] {
  return indexRowKeys(o).map((rowKey) => ({
    partitionKey,
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
    partition: row.partitionKey,
  };
}

export class StateIndex {
  /** Each counter shard as this process last wrote it. */
  private readonly known = new Map<string, { count: number; etag: string }>();
  /** Shards a move of this process is writing now. */
  private readonly busy = new Set<string>();
  /** Moves of this process waiting for a shard of their partition to be free. */
  private readonly waiting = new Map<string, ((shard: number) => void)[]>();

  constructor(
    readonly table: TableClient,
    private readonly metrics: StoreMetrics,
    readonly layout: IndexLayout,
  ) {}

  /**
   * Before the order's transaction: the order is listed (and counted) in its next state from now on.
   * True when this call created the group, false when it was there already (another writer's).
   */
  async enter(o: IndexedOrder): Promise<boolean> {
    return this.move(o, this.layout.partitionFor(o.state, o.orderId), 1);
  }

  /**
   * After the transaction, after a lost race, and when a reader or the reconcile finds a group
   * unconfirmed: the group goes and its partition's count goes down with it. True when this call
   * removed it. An entry read from a partition is removed there; otherwise the current layout's
   * partition is tried first, then (while an older layout is listed) the others.
   */
  async leave(o: IndexedOrder): Promise<boolean> {
    if (o.partition !== undefined) return this.move(o, o.partition, -1);
    const [first, ...others] = this.layout.candidates(o.state, o.orderId);
    if (await this.move(o, first, -1)) return true;
    for (const partitionKey of others) {
      if ((await this.hasIn(o, partitionKey)) && (await this.move(o, partitionKey, -1))) return true;
    }
    return false;
  }

  /** Whether the order's group for this state and time is in the index (a point read per layout). */
  async has(o: Pick<IndexedOrder, 'state' | 'since' | 'orderId'>): Promise<boolean> {
    for (const partitionKey of this.layout.candidates(o.state, o.orderId)) {
      if (await this.hasIn(o, partitionKey)) return true;
    }
    return false;
  }

  private async hasIn(o: Pick<IndexedOrder, 'since' | 'orderId'>, partitionKey: string): Promise<boolean> {
    try {
      await this.table.getEntity(partitionKey, guardRowKey(o), {
        queryOptions: { select: ['PartitionKey'] },
      });
      this.metrics.entitiesRead += 1;
      return true;
    } catch (e) {
      if (httpStatusOf(e) === 404) return false;
      throw e;
    }
  }

  /** Orders per state: the counter shards of every partition of every state, one query each. */
  async totals(): Promise<Record<ProcessState, number>> {
    await this.layout.refresh();
    const counts = Object.fromEntries(processStates.map((s) => [s, 0])) as Record<ProcessState, number>;
    await Promise.all(
      processStates.flatMap((state) =>
        this.layout.partitionsOf(state).map(async (partitionKey) => {
          const filter = odata`PartitionKey eq ${partitionKey} and RowKey ge ${'n:'} and RowKey lt ${'n;'}`;
          for await (const row of this.table.listEntities<Record<string, unknown>>({
            queryOptions: { filter, select: ['Count'] },
          })) {
            this.metrics.entitiesRead += 1;
            counts[state] += Number(row.Count ?? 0);
          }
        }),
      ),
    );
    return counts;
  }

  /**
   * Creates (+1) or deletes (-1) the order's group in `partitionKey` and moves one counter shard of
   * that partition, in one batch. The counter is ETag-guarded. This process keeps the ETag and
   * value its own last write of each shard returned, and picks a shard none of its own moves is
   * using, so on one instance a move is one request; a shard another instance wrote since fails
   * with 412 and is read again. A batch refused because the group is already there (+1) or already
   * gone (-1) means another writer did it: nothing to do, nothing counted twice.
   */
  private async move(o: IndexedOrder, partitionKey: string, delta: 1 | -1, attempts = 12): Promise<boolean> {
    let partial = false;
    for (let i = 0; ; i++) {
      const shard = await this.takeShard(partitionKey);
      const key = `${partitionKey}|${shard}`;
      try {
        const counter = this.known.get(key) ?? (await this.counter(partitionKey, shard));
        const entries: TransactionAction[] =
          delta > 0
            ? indexEntries(o, partitionKey).map((e) => {
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
          // ServerBusy did nothing, so the shard's ETag still holds; any other failure (a timeout
          // may have committed) leaves it unknown.
          if (httpStatusOf(e) !== 503) this.known.delete(key);
          throw e;
        }
        if (partial) await this.removeUncounted(o, partitionKey);
        return true;
      } catch (e) {
        const status = httpStatusOf(e);
        if (status !== 404 && status !== 409 && status !== 412) throw e;
        const present = await this.hasIn(o, partitionKey);
        if (delta > 0 && present) return false;
        if (delta < 0 && !present) {
          // Uncounted leftovers (entries without their guard) go one by one.
          await this.removeUncounted(o, partitionKey);
          return false;
        }
        // An entry of a counted group is missing: the guard and the counter alone, then the rest.
        if (delta < 0 && status === 404) partial = true;
        if (i + 1 >= attempts) throw e;
        await new Promise((r) => setTimeout(r, Math.random() * 10 * (i + 1)));
      } finally {
        this.release(partitionKey, shard);
      }
    }
  }

  /**
   * A counter shard of the partition that no move of this process is writing, marked busy: one whose
   * ETag this process holds if there is one (no read), else any. When every shard is busy the move
   * waits for one: taking a busy shard made the process conflict with itself (a 412 or 409 and a
   * batch's entities paid for nothing, on the partition that binds). A shard another instance wrote
   * since is dropped from what this process holds (412), so instances drift apart.
   */
  private async takeShard(partitionKey: string): Promise<number> {
    const start = randomInt(countShards);
    let free: number | undefined;
    for (let k = 0; k < countShards; k++) {
      const shard = (start + k) % countShards;
      const key = `${partitionKey}|${shard}`;
      if (this.busy.has(key)) continue;
      if (this.known.has(key)) {
        free = shard;
        break;
      }
      free ??= shard;
    }
    if (free !== undefined) {
      this.busy.add(`${partitionKey}|${free}`);
      return free;
    }
    // The next shard released is handed over, still busy, so no newcomer takes it first.
    return new Promise<number>((resolve) => {
      const queue = this.waiting.get(partitionKey) ?? [];
      queue.push(resolve);
      this.waiting.set(partitionKey, queue);
    });
  }

  private release(partitionKey: string, shard: number): void {
    const queue = this.waiting.get(partitionKey);
    const next = queue?.shift();
    if (queue?.length === 0) this.waiting.delete(partitionKey);
    if (next) next(shard);
    else this.busy.delete(`${partitionKey}|${shard}`);
  }

  private async removeUncounted(o: IndexedOrder, partitionKey: string): Promise<void> {
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

  /**
   * Moves a confirmed entry read from a partition of an older layout to where the current layout
   * puts it (the reconcile pass): the new group first, then the old one goes. True when moved.
   */
  async relocate(o: IndexedOrder): Promise<boolean> {
    const target = this.layout.partitionFor(o.state, o.orderId);
    if (o.partition === undefined || o.partition === target) return false;
    const { partition: _from, ...entry } = o;
    await this.enter(entry);
    return this.move(o, o.partition, -1);
  }

  /**
   * After a full reconcile pass: an older layout whose own partitions (those the current layout
   * does not use) hold no group any more loses its counters and is no longer read. Returns the
   * layouts retired.
   */
  async retireEmptied(): Promise<number[]> {
    await this.layout.refresh(true);
    const current = new Set(processStates.flatMap((s) => statePartitionKeys(s, this.layout.current)));
    const retired: number[] = [];
    for (const p of this.layout.all().slice(1)) {
      const own = processStates.flatMap((s) => statePartitionKeys(s, p)).filter((k) => !current.has(k));
      const holding = await Promise.all(
        own.map(async (partitionKey) => {
          const pages = this.table
            .listEntities({
              queryOptions: {
                filter: odata`PartitionKey eq ${partitionKey} and RowKey lt ${'n:'}`,
                select: ['RowKey'],
              },
            })
            .byPage({ maxPageSize: 1 });
          const { value, done } = await pages.next();
          return !done && value !== undefined && value.length > 0;
        }),
      );
      if (holding.some(Boolean)) continue;
      await this.layout.retire(p);
      await Promise.all(
        own.map(async (partitionKey) => {
          const filter = odata`PartitionKey eq ${partitionKey} and RowKey ge ${'n:'} and RowKey lt ${'n;'}`;
          for await (const row of this.table.listEntities({ queryOptions: { filter, select: ['RowKey'] } })) {
            await this.table.deleteEntity(partitionKey, row.rowKey!).catch((e: unknown) => {
              if (httpStatusOf(e) !== 404) throw e;
            });
          }
        }),
      );
      retired.push(p);
    }
    return retired;
  }

  /**
   * One page of entries in key order (newest first) across the state's partitions, not yet
   * verified: O(page + partitions) entities, one query per partition plus a few refills.
   */
  async page(
    filter: IndexFilter,
    maxPageSize: number,
    continuationToken?: string,
  ): Promise<{ rows: IndexedOrder[]; continuationToken?: string }> {
    const range = inKeyRange(filter);
    if (range === null) return { rows: [] };
    filter = range;
    await this.layout.refresh();
    const prefix = prefixOf(filter);
    const resume = resumeFrom(continuationToken);
    let low = filter.to ? `${prefix}${inverted(filter.to)}` : prefix;
    if (resume.at !== undefined && resume.at > low) low = resume.at;
    // ';' sorts right after ':', so `${prefix}${inv};` is past every key of that instant.
    const high = filter.from ? `${prefix}${inverted(filter.from)};` : `${prefix.slice(0, -1)};`;
    // Within one customer's entries of one state: a filtered read of that customer's range.
    const where =
      filter.customerId !== undefined && filter.workflowVersion !== undefined
        ? odata`WorkflowVersion eq ${filter.workflowVersion}`
        : undefined;
    const { rows, more } = await mergedRange(
      this.table,
      this.metrics,
      this.layout.partitionsOf(filter.state),
      {
        low,
        high,
        ...(resume.after !== undefined ? { after: resume.after } : {}),
        ...(where ? { where } : {}),
      },
      maxPageSize,
    );
    const listed = rows.map(rowToIndexed);
    const last = rows.at(-1);
    return more && last ? { rows: listed, continuationToken: mergedToken(last.rowKey) } : { rows: listed };
  }

  /** The entries longest in `state`, oldest first across its partitions (unverified). */
  async oldest(state: ProcessState, n: number): Promise<IndexedOrder[]> {
    await this.layout.refresh();
    const { rows } = await mergedRange(
      this.table,
      this.metrics,
      this.layout.partitionsOf(state),
      { low: 'a:', high: 'a;' },
      n,
    );
    return rows.map(rowToIndexed);
  }

  /**
   * The entries that entered `state` by `until`, oldest first across its partitions, at most `n`
   * (unverified); `more` when the range goes on. O(n + partitions) entities, never a scan.
   */
  async oldestUntil(
    state: ProcessState,
    until: Date,
    n: number,
  ): Promise<{ entries: IndexedOrder[]; more: boolean }> {
    await this.layout.refresh();
    const { rows, more } = await mergedRange(
      this.table,
      this.metrics,
      this.layout.partitionsOf(state),
      { low: 'a:', high: `a:${msKey(until.getTime())};` },
      n,
    );
    return { entries: rows.map(rowToIndexed), more };
  }

  /**
   * Entries of orders that entered any state after `after` and by `until`, oldest first, at most
   * about `limit` (unverified), and `through`: every entry up to that instant is in `rows`, so a
   * feed that resumes after it misses none. Reads each state's `a:` range (oldest first) across its
   * partitions: O(changes). An order that moved twice shows once, in the state it is in. A page
   * never ends inside a millisecond: that millisecond goes to the next page, or, when the whole page
   * is one millisecond, is read to its end.
   */
  async changedSince(
    after: Date,
    until: Date,
    limit: number,
  ): Promise<{ rows: IndexedOrder[]; through: Date }> {
    await this.layout.refresh();
    const read = (low: string, high: string, n: number) =>
      Promise.all(
        processStates.map(async (state) => {
          const { rows } = await mergedRange(
            this.table,
            this.metrics,
            this.layout.partitionsOf(state),
            { low, high },
            n,
          );
          return rows.map(rowToIndexed);
        }),
      ).then((all) => all.flat().sort((a, b) => a.since.getTime() - b.since.getTime()));
    const rows = await read(`a:${msKey(after.getTime() + 1)}`, `a:${msKey(until.getTime())};`, limit + 1);
    if (rows.length <= limit) return { rows, through: until };
    const lastMs = rows[limit - 1].since.getTime();
    const before = rows.slice(0, limit).filter((r) => r.since.getTime() < lastMs);
    if (before.length > 0) return { rows: before, through: new Date(lastMs - 1) };
    const instant = await read(`a:${msKey(lastMs)}:`, `a:${msKey(lastMs)};`, 100_000);
    return { rows: instant, through: new Date(lastMs) };
  }
}
