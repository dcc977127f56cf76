import type { TableClient } from '@azure/data-tables';
import { processStates, type ProcessState } from '../domain/state.js';
import { httpStatusOf } from './errors.js';
import { refusedForLoad, retryLaterIfRefused } from './patience.js';
import { stateRowKey } from './rows.js';
import type { IndexedOrder, StateIndex } from './stateIndex.js';

/**
 * Removals from the state index that the service refused for load, kept in the order's own state
 * row (`Leaving`), so they outlive the process that was refused: the order's next writer finishes
 * them. A group the order left is removed after the order's transaction (stateIndex.ts); under a
 * throttled partition that removal was refused past every retry for 18-73 % of the orders
 * (docs/performance.md), and what is dropped was counted in the old state until the hourly repair
 * paid for it, which also made the throttled window look cheaper than the load it defers.
 *
 * Nothing is written while removals land: the field is written only when one is refused (one merge
 * of the state row, guarded by the ETag the transaction returned), and the next save, which writes
 * the row anyway, drops it and removes what it names after its own transaction. A removal still
 * refused then is named again. What a process that stops between its transaction and the merge
 * leaves, the readers and the repair pass remove, as before.
 */
export interface Leaving {
  state: ProcessState;
  since: Date;
}

const field = 'Leaving';

/** The removals a state row names (none on rows written before the field). */
export function leavingOf(row: Record<string, unknown>): Leaving[] {
  const raw = row[field];
  if (typeof raw !== 'string') return [];
  try {
    const parsed = JSON.parse(raw) as unknown;
    if (!Array.isArray(parsed)) return [];
    return parsed.flatMap((x: unknown) => {
      const { state, since } = (x ?? {}) as { state?: unknown; since?: unknown };
      const at = typeof since === 'string' ? new Date(since) : undefined;
      if (!processStates.includes(state as ProcessState) || !at || Number.isNaN(at.getTime())) return [];
      return [{ state: state as ProcessState, since: at }];
    });
  } catch {
    return [];
  }
}

export interface Removal {
  group: IndexedOrder;
  /** Named by an earlier writer: the group may be gone already (a background retry), so look first. */
  named: boolean;
}

/**
 * Removes each group; the ones the service refused for load are named in the state row (its ETag
 * `etag`, as the transaction returned it) and tried again in the background. Returns the state
 * row's ETag after (changed only when a removal was named). Any other failure is left to the
 * readers and the repair pass.
 */
export async function finishRemovals(
  index: StateIndex,
  orders: TableClient,
  orderId: string,
  removals: Removal[],
  etag: string,
): Promise<string> {
  const refused: Removal[] = [];
  await Promise.all(
    removals.map(async (r) => {
      const leave = async () => {
        if (r.named && !(await index.has(r.group))) return false;
        return index.leave(r.group);
      };
      try {
        await leave();
      } catch (e) {
        if (!refusedForLoad(e)) return;
        refused.push(r);
        retryLaterIfRefused(e, leave);
      }
    }),
  );
  if (refused.length === 0) return etag;
  const named = refused.map((r) => ({ state: r.group.state, since: r.group.since.toISOString() }));
  try {
    const response = await orders.updateEntity(
      { partitionKey: orderId, rowKey: stateRowKey, [field]: JSON.stringify(named) },
      'Merge',
      { etag },
    );
    return response.etag ?? etag;
  } catch (e) {
    // 412: another writer saved first and did not see them; the readers and the repair pass remain.
    if (httpStatusOf(e) === 412 || refusedForLoad(e)) return etag;
    throw e;
  }
}
