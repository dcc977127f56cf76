import { randomBytes } from 'node:crypto';
import type { TableEntity } from '@azure/data-tables';

/**
 * One history entity per event in the order's partition (CONTRACT.md, "Order history").
 * Written here, ahead of the history helper's version of this module, by the operator's
 * dead-letter actions; at merge that version replaces this one (same signature).
 */
export interface HistoryEntry {
  at: Date;
  actor: 'submission' | 'scheduler' | 'agent' | 'supervisor' | 'operator';
  /** Operator name/identity, when actor = operator. */
  by?: string;
  event: string;
  step?: string;
  attempt?: number;
  run?: number;
  workflow?: string;
  workflowVersion?: number;
  /** Process state after the transition, or 'redriven' / 'discarded'. */
  outcome?: string;
  /** Error code + detail, truncated to 2,000 characters. */
  error?: string;
  traceId?: string;
}

const maxErrorChars = 2_000;
type Props = Record<string, unknown>;

/** `history:{13-digit epoch ms}:{8 hex}`: sorts oldest first within the partition. */
export function historyRowKey(at: Date, unique = randomBytes(4).toString('hex')): string {
  return `history:${String(at.getTime()).padStart(13, '0')}:${unique}`;
}

export function historyEntryToRow(orderId: string, entry: HistoryEntry): TableEntity<Props> {
  const row: TableEntity<Props> = {
    partitionKey: orderId,
    rowKey: historyRowKey(entry.at),
    At: entry.at,
    Actor: entry.actor,
    Event: entry.event,
  };
  const optional: Props = {
    By: entry.by,
    Step: entry.step,
    Attempt: entry.attempt,
    Run: entry.run,
    Workflow: entry.workflow,
    WorkflowVersion: entry.workflowVersion,
    Outcome: entry.outcome,
    Error: entry.error?.slice(0, maxErrorChars),
    TraceId: entry.traceId,
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined && v !== null) row[k] = v;
  return row;
}

export function rowToHistoryEntry(row: Props): HistoryEntry {
  const str = (k: string) => (typeof row[k] === 'string' ? (row[k] as string) : undefined);
  const num = (k: string) => (typeof row[k] === 'number' ? (row[k] as number) : undefined);
  const at = row.At instanceof Date ? row.At : new Date(String(row.At));
  const entry: HistoryEntry = {
    at,
    actor: (str('Actor') ?? 'operator') as HistoryEntry['actor'],
    event: str('Event') ?? '',
  };
  const optional: Partial<HistoryEntry> = {
    by: str('By'),
    step: str('Step'),
    attempt: num('Attempt'),
    run: num('Run'),
    workflow: str('Workflow'),
    workflowVersion: num('WorkflowVersion'),
    outcome: str('Outcome'),
    error: str('Error'),
    traceId: str('TraceId'),
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) (entry as unknown as Props)[k] = v;
  return entry;
}
