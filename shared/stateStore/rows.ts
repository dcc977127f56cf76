import type { TableEntity, TableEntityResult } from '@azure/data-tables';
import type { Order } from '../domain/order.js';
import type { OrderState, StepState } from '../domain/state.js';
import { waitingStep } from '../domain/waiting.js';

/**
 * Row layout of one order's partition (PartitionKey = orderId):
 * Both the order and the state row record the workflow (`Workflow`, its name) and the version the
 * order started on (`WorkflowVersion`, an Int32; absent on rows from before versions: version 1).
 *   RowKey 'order'        the order document (items and address as JSON strings: a property
 *                         value is limited to 64 KiB, and these are bounded far below that)
 *   RowKey 'state'        the process state (the pattern's state record)
 *   RowKey 'step:<name>'  one row per step
 * Null fields are omitted (Replace removes them); absent reads back as null. Dates are
 * Edm.DateTime.
 */
export const orderRowKey = 'order';
export const stateRowKey = 'state';
export const stepRowKey = (name: string): string => `step:${name}`;

type Props = Record<string, unknown>;
/** A row as read: the service always returns the keys and the ETag. */
export type Row = TableEntityResult<Props> & { partitionKey: string; rowKey: string; etag: string };

function compact(entity: Props): Props {
  const out: Props = {};
  for (const [k, v] of Object.entries(entity)) if (v !== null && v !== undefined) out[k] = v;
  return out;
}

export function orderToRow(
  order: Order,
  workflow: { name: string; version: number },
  traceParent?: string,
): TableEntity<Props> {
  return {
    partitionKey: order.orderId,
    rowKey: orderRowKey,
    ...compact({
      Workflow: workflow.name,
      WorkflowVersion: workflow.version,
      CustomerId: order.customerId,
      Items: JSON.stringify(order.items),
      ShippingAddress: JSON.stringify(order.shippingAddress),
      RequestHash: order.requestHash,
      CallerScope: order.callerScope || null,
      CreatedAt: order.createdAt,
      TraceParent: traceParent,
    }),
  };
}

export function stateToRow(s: OrderState): TableEntity<Props> {
  return {
    partitionKey: s.orderId,
    rowKey: stateRowKey,
    ...compact({
      Workflow: s.workflow,
      WorkflowVersion: s.workflowVersion,
      Run: s.run,
      ProcessState: s.processState,
      LockedBy: s.lockedBy,
      CompleteBy: s.completeBy,
      FailureCount: s.failureCount,
      ScheduledFor: s.scheduledFor,
      CompensationReason: s.compensationReason,
      ErrorCode: s.errorCode,
      ErrorDetail: s.errorDetail,
      CreatedAt: s.createdAt,
      UpdatedAt: s.updatedAt,
      StepCount: s.steps.length,
      // A step waits for a callback or an operator: the sweep reads the order seldom (inFlightIndex.ts).
      Waiting: waitingStep(s) ? true : null,
    }),
  };
}

export function stepToRow(orderId: string, index: number, st: StepState): TableEntity<Props> {
  return {
    partitionKey: orderId,
    rowKey: stepRowKey(st.name),
    ...compact({
      Index: index,
      Name: st.name,
      Status: st.status,
      Run: st.run,
      Attempt: st.attempt,
      CompensationAttempt: st.compensationAttempt,
      CompleteBy: st.completeBy,
      LastError: st.lastError,
      StartedAt: st.startedAt,
      CompletedAt: st.completedAt,
      CompensatedAt: st.compensatedAt,
      StalledAttempt: st.stalledAttempt,
      Stalls: st.stalls || null,
      UndoStalls: st.undoStalls || null,
      WaitingSince: st.waitingSince ?? null,
      Reference: st.reference ?? null,
      Answer: st.answer ?? null,
    }),
  };
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v ?? 0));
const date = (v: unknown): Date | null =>
  v instanceof Date ? v : typeof v === 'string' ? new Date(v) : null;

export function rowToOrder(row: Row): Order {
  const order: Order = {
    orderId: row.partitionKey,
    customerId: str(row.CustomerId) ?? '',
    items: JSON.parse(str(row.Items) ?? '[]') as Order['items'],
    shippingAddress: JSON.parse(str(row.ShippingAddress) ?? '{}') as Order['shippingAddress'],
    createdAt: date(row.CreatedAt) ?? new Date(0),
  };
  const hash = str(row.RequestHash);
  if (hash !== null) order.requestHash = hash;
  const scope = str(row.CallerScope);
  if (scope) order.callerScope = scope;
  return order;
}

export function rowToStep(row: Row): StepState {
  return {
    name: str(row.Name) ?? row.rowKey.slice('step:'.length),
    status: str(row.Status) as StepState['status'],
    run: num(row.Run),
    attempt: num(row.Attempt),
    compensationAttempt: num(row.CompensationAttempt),
    completeBy: date(row.CompleteBy),
    lastError: str(row.LastError),
    startedAt: date(row.StartedAt),
    completedAt: date(row.CompletedAt),
    compensatedAt: date(row.CompensatedAt),
    stalledAttempt: typeof row.StalledAttempt === 'number' ? row.StalledAttempt : null,
    stalls: num(row.Stalls),
    undoStalls: num(row.UndoStalls),
    waitingSince: date(row.WaitingSince),
    reference: str(row.Reference),
    answer: str(row.Answer),
  };
}

/** Rows written before workflows had versions carry none: those orders started on version 1. */
export function workflowVersionOf(row: Props): number {
  const v = row.WorkflowVersion;
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 ? v : 1;
}

export function rowToState(row: Row, steps: StepState[]): OrderState {
  return {
    orderId: row.partitionKey,
    workflow: str(row.Workflow) ?? '',
    workflowVersion: workflowVersionOf(row),
    run: num(row.Run),
    processState: str(row.ProcessState) as OrderState['processState'],
    lockedBy: str(row.LockedBy),
    completeBy: date(row.CompleteBy),
    failureCount: num(row.FailureCount),
    scheduledFor: date(row.ScheduledFor),
    compensationReason: str(row.CompensationReason) as OrderState['compensationReason'],
    errorCode: str(row.ErrorCode) as OrderState['errorCode'],
    errorDetail: str(row.ErrorDetail),
    createdAt: date(row.CreatedAt) ?? new Date(0),
    updatedAt: date(row.UpdatedAt) ?? new Date(0),
    steps,
  };
}
