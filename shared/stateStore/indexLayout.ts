import { odata, type TableClient } from '@azure/data-tables';
import { processStates, type ProcessState } from '../domain/state.js';
import { httpStatusOf } from './errors.js';
import type { StoreMetrics } from './metrics.js';

/**
 * Where the state index keeps an order's entries: each state's groups and counters are spread over
 * P partitions (ORDER_INDEX_PARTITIONS), the one of an order chosen from its id, so no lookup and
 * no partition that every order of a state goes through. P = 1 is the layout before the spread
 * (`state:{State}`), so an index written then is the P = 1 layout.
 *
 * Changing P must keep every order reachable: the P values whose entries may still be in place are
 * kept in one row of the index table (`layout`/`partitions`). Every store adds its own P when it
 * opens; readers read the union of the listed layouts; the reconcile pass moves entries of an older
 * layout to the current one and, when an older layout's partitions hold no group any more, deletes
 * their counters and drops it from the row (StateStore.reconcilePage).
 */
export const defaultIndexPartitions = 32;
export const maxIndexPartitions = 256;

const layoutRow = { partitionKey: 'layout', rowKey: 'partitions' };
/** How long a reader trusts the layouts it read: another instance may have added one since. */
const layoutTtlMs = 60_000;

/** FNV-1a (32 bit) of the order id, so every instance and every release agrees. */
export function partitionNumber(orderId: string, partitions: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < orderId.length; i++) {
    h ^= orderId.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % partitions;
}

export function statePartitionKey(state: ProcessState, orderId: string, partitions: number): string {
  return partitions === 1 ? `state:${state}` : `state:${state}:${partitionNumber(orderId, partitions)}`;
}

export function statePartitionKeys(state: ProcessState, partitions: number): string[] {
  if (partitions === 1) return [`state:${state}`];
  return Array.from({ length: partitions }, (_, p) => `state:${state}:${p}`);
}

function parseLayouts(value: unknown): number[] {
  if (typeof value !== 'string') return [];
  return value
    .split(',')
    .map(Number)
    .filter((p) => Number.isInteger(p) && p >= 1 && p <= maxIndexPartitions);
}

export class IndexLayout {
  /** The P values readers cover: the current one first. */
  private layouts: number[];
  private readAt = 0;

  constructor(
    private readonly table: TableClient,
    private readonly metrics: StoreMetrics,
    /** New entries go here. */
    readonly current: number = defaultIndexPartitions,
  ) {
    if (!Number.isInteger(current) || current < 1 || current > maxIndexPartitions) {
      throw new RangeError(`state index partitions must be an integer from 1 to ${maxIndexPartitions}`);
    }
    this.layouts = [current];
  }

  /** Every P a reader covers, the current first. */
  all(): number[] {
    return this.layouts;
  }

  /** The partitions a reader of `state` reads: the union over the layouts. */
  partitionsOf(state: ProcessState): string[] {
    return [...new Set(this.layouts.flatMap((p) => statePartitionKeys(state, p)))];
  }

  /** Where a new entry of the order goes. */
  partitionFor(state: ProcessState, orderId: string): string {
    return statePartitionKey(state, orderId, this.current);
  }

  /** Where the order's entry may be: the current layout's partition first. */
  candidates(state: ProcessState, orderId: string): string[] {
    return [...new Set(this.layouts.map((p) => statePartitionKey(state, orderId, p)))];
  }

  /**
   * Reads the layouts row and adds the current P to it. A table without the row that holds entries
   * of the layout before the spread (P = 1) lists that layout too, so nothing written then is lost.
   */
  async open(): Promise<void> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const row = await this.readRow();
      if (row === null) {
        const listed =
          this.current !== 1 && (await this.legacyHasEntries()) ? [this.current, 1] : [this.current];
        try {
          await this.table.createEntity({ ...layoutRow, Partitions: listed.join(',') });
          this.set(listed);
          return;
        } catch (e) {
          if (httpStatusOf(e) !== 409) throw e;
          continue;
        }
      }
      const listed = parseLayouts(row.Partitions);
      if (listed.includes(this.current)) {
        this.set(listed);
        return;
      }
      try {
        await this.table.updateEntity(
          { ...layoutRow, Partitions: [...listed, this.current].join(',') },
          'Replace',
          { etag: row.etag },
        );
        this.set([...listed, this.current]);
        return;
      } catch (e) {
        if (httpStatusOf(e) !== 412) throw e;
      }
    }
    throw new Error('state index layout row: too many concurrent writers');
  }

  /** Re-reads the row when the last read is older than a minute (cheap: one point read). */
  async refresh(force = false): Promise<void> {
    if (!force && Date.now() - this.readAt < layoutTtlMs) return;
    const row = await this.readRow();
    if (row !== null) this.set(parseLayouts(row.Partitions));
  }

  /** Drops a layout whose partitions the reconcile pass has emptied. */
  async retire(partitions: number): Promise<void> {
    if (partitions === this.current) return;
    for (let attempt = 0; attempt < 10; attempt++) {
      const row = await this.readRow();
      if (row === null) return;
      const listed = parseLayouts(row.Partitions);
      if (!listed.includes(partitions)) return this.set(listed);
      const kept = listed.filter((p) => p !== partitions);
      try {
        await this.table.updateEntity({ ...layoutRow, Partitions: kept.join(',') }, 'Replace', {
          etag: row.etag,
        });
        return this.set(kept);
      } catch (e) {
        if (httpStatusOf(e) !== 412) throw e;
      }
    }
  }

  private set(listed: number[]): void {
    this.layouts = [this.current, ...listed.filter((p) => p !== this.current)];
    this.readAt = Date.now();
  }

  private async readRow(): Promise<{ Partitions?: unknown; etag: string } | null> {
    try {
      const row = await this.table.getEntity<{ Partitions?: unknown }>(
        layoutRow.partitionKey,
        layoutRow.rowKey,
      );
      this.metrics.entitiesRead += 1;
      return row;
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      throw e;
    }
  }

  private async legacyHasEntries(): Promise<boolean> {
    const found = await Promise.all(
      processStates.map(async (state) => {
        const pages = this.table
          .listEntities({
            queryOptions: { filter: odata`PartitionKey eq ${`state:${state}`}`, select: ['RowKey'] },
          })
          .byPage({ maxPageSize: 1 });
        const { value, done } = await pages.next();
        return !done && value !== undefined && value.length > 0;
      }),
    );
    return found.some(Boolean);
  }
}
