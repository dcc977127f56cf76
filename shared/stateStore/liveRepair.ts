import { isTerminal, processStates, type ProcessState } from '../domain/state.js';
import type { InFlightIndex } from './inFlightIndex.js';
import type { ReconcileCursor } from './repairLedger.js';
import { stateRowKey, type Row } from './rows.js';
import type { StateIndex } from './stateIndex.js';

/** The states an in-flight order can be in: the hourly pass reads only their index entries. */
const inFlightStates = processStates.filter((s) => !isTerminal(s));

/** Where an hourly pass starts once every state row carries the index's marker. */
export const firstLiveStage: ReconcileCursor['stage'] = `live:${inFlightStates[0]}`;

export interface LiveRepairProgress {
  scanned: number;
  recreated: number;
  next: ReconcileCursor | null;
}

/**
 * One page of an hourly pass once backfilled: the state index's entries of one in-flight state
 * (a superset of the orders in it, O(in-flight) whatever the history), each order's in-flight row
 * re-created when lost. The row is put due now: the sweep then reads the order's state row and
 * sets its real deadline, or removes the row if the order has finished meanwhile. An order whose
 * group is lost too is the daily full pass's, which reads every state row.
 */
export async function liveRepairPage(
  stateIndex: StateIndex,
  index: InFlightIndex,
  cursor: ReconcileCursor,
  pageSize: number,
): Promise<LiveRepairProgress> {
  const state = cursor.stage.slice('live:'.length) as ProcessState;
  const page = await stateIndex.page({ state }, pageSize, cursor.token);
  const rows = page.rows.map(
    (e) => ({ partitionKey: e.orderId, rowKey: stateRowKey, ProcessState: e.state }) as unknown as Row,
  );
  const recreated = await index.recreateMissing(rows);
  const following = inFlightStates[inFlightStates.indexOf(state) + 1];
  const next: ReconcileCursor | null = page.continuationToken
    ? { ...cursor, token: page.continuationToken }
    : following
      ? { stage: `live:${following}` }
      : null;
  return { scanned: page.rows.length, recreated, next };
}
