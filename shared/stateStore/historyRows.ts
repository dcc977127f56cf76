import { randomBytes } from 'node:crypto';
import type { TableEntity } from '@azure/data-tables';
import { clipHistoryError, type HistoryActor, type HistoryEntry } from '../domain/history.js';
import type { Row } from './rows.js';

export type { HistoryActor, HistoryEntry } from '../domain/history.js';

/**
 * History rows live in the order's own partition, so a transition writes its entry in the same
 * entity-group transaction (one billed request, all or nothing). RowKey
 * `history:{13-digit epoch ms}:{8 hex}` sorts oldest first and sorts before `order`, `state` and
 * `step:*`, so the order's load reads `RowKey ge 'order'` and never pays for its history.
 */
export const historyRowPrefix = 'history:';
/** The first key after every history key (':' + 1 = ';'). */
export const historyRowEnd = 'history;';

export function historyRowKey(at: Date): string {
  return `${historyRowPrefix}${String(at.getTime()).padStart(13, '0')}:${randomBytes(4).toString('hex')}`;
}

type Props = Record<string, unknown>;

export function historyEntryToRow(orderId: string, entry: HistoryEntry): TableEntity<Props> {
  const row: TableEntity<Props> = {
    partitionKey: orderId,
    rowKey: historyRowKey(entry.at),
    At: entry.at,
    Actor: entry.actor,
    Event: entry.event,
  };
  if (entry.by !== undefined) row.By = entry.by.slice(0, 200);
  if (entry.step !== undefined) row.Step = entry.step;
  if (entry.attempt !== undefined) row.Attempt = entry.attempt;
  if (entry.run !== undefined) row.Run = entry.run;
  if (entry.workflow !== undefined) row.Workflow = entry.workflow;
  if (entry.workflowVersion !== undefined) row.WorkflowVersion = entry.workflowVersion;
  if (entry.outcome !== undefined) row.Outcome = entry.outcome;
  if (entry.error !== undefined) row.Error = clipHistoryError(entry.error);
  if (entry.traceId !== undefined) row.TraceId = entry.traceId;
  return row;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const int = (v: unknown): number | undefined =>
  typeof v === 'number' ? v : typeof v === 'string' && v !== '' ? Number(v) : undefined;

export function rowToHistoryEntry(row: Row | TableEntity<Props>): HistoryEntry {
  const r = row as Props;
  const at = r.At instanceof Date ? r.At : new Date(String(r.At ?? r.timestamp ?? 0));
  const entry: HistoryEntry = {
    at,
    actor: (str(r.Actor) ?? 'operator') as HistoryActor,
    event: str(r.Event) ?? 'Unknown',
  };
  const set = <K extends keyof HistoryEntry>(k: K, v: HistoryEntry[K] | undefined): void => {
    if (v !== undefined) entry[k] = v;
  };
  set('by', str(r.By));
  set('step', str(r.Step));
  set('attempt', int(r.Attempt));
  set('run', int(r.Run));
  set('workflow', str(r.Workflow));
  set('workflowVersion', int(r.WorkflowVersion));
  set('outcome', str(r.Outcome));
  set('error', str(r.Error));
  set('traceId', str(r.TraceId));
  return entry;
}

/** History as the API shows it: `at` as ISO text. */
export function historyEntryJson(entry: HistoryEntry): Record<string, unknown> {
  return { ...entry, at: entry.at.toISOString() };
}
