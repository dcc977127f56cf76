import { z } from 'zod';
import type { HistoryEntry } from '../domain/history.js';
import { orderIdSchema, processStateSchema } from './orderView.js';

/** What the operator routes beyond the list answer (and the bulk request), as zod schemas. */

const timestamp = z.iso.datetime();
const actors = ['submission', 'scheduler', 'agent', 'supervisor', 'operator'] as const;

export const historyEntrySchema = z.strictObject({
  at: timestamp,
  actor: z.enum(actors),
  by: z.string().optional().meta({ description: 'The operator, when actor is operator.' }),
  event: z.string(),
  step: z.string().optional(),
  attempt: z.number().int().nonnegative().optional(),
  run: z.number().int().min(1).optional(),
  workflow: z.string().optional(),
  workflowVersion: z.number().int().min(1).optional(),
  outcome: z.string().optional().meta({ description: 'The process state after the event.' }),
  error: z.string().max(2000).optional(),
  traceId: z.string().optional(),
});

export const historyPageSchema = z.strictObject({
  orderId: orderIdSchema,
  entries: z.array(historyEntrySchema).meta({ description: 'Oldest first.' }),
  continuationToken: z.string().optional(),
  next: z.string().optional(),
});

export function historyEntryView(e: HistoryEntry): z.output<typeof historyEntrySchema> {
  return { ...e, at: e.at.toISOString() };
}

const countsByState = z.strictObject({
  Pending: z.number().int().nonnegative(),
  Processing: z.number().int().nonnegative(),
  Processed: z.number().int().nonnegative(),
  Compensating: z.number().int().nonnegative(),
  Compensated: z.number().int().nonnegative(),
  Error: z.number().int().nonnegative(),
});

export const orderCountsSchema = z.strictObject({
  counts: countsByState,
  inFlight: z.number().int().nonnegative(),
  oldestInFlight: z
    .strictObject({
      orderId: orderIdSchema,
      processState: processStateSchema,
      ageSeconds: z.number().nonnegative(),
      boundSeconds: z.number().nonnegative(),
    })
    .nullable()
    .meta({
      description: 'The order longest in its in-flight state, against how long that state should last.',
    }),
  asOf: timestamp,
});

export const orderChangesSchema = z.strictObject({
  changes: z.array(
    z.strictObject({ orderId: orderIdSchema, processState: processStateSchema, updatedAt: timestamp }),
  ),
  cursor: z.string().meta({ description: 'Pass as `after` next time.' }),
});

export const bulkActions = ['resubmit', 'cancel', 'retry'] as const;
export type BulkAction = (typeof bulkActions)[number];

export const bulkFilterSchema = z.strictObject({
  state: processStateSchema,
  workflowVersion: z.number().int().min(1).max(999_999).optional(),
  customerId: z.string().min(1).max(200).optional(),
  from: timestamp.optional(),
  to: timestamp.optional(),
});

export const bulkRequestSchema = z.strictObject({
  filter: bulkFilterSchema,
  limit: z.number().int().min(1).max(500).optional().meta({ description: 'Orders at most (default 100).' }),
  confirm: z.string().max(200).optional().meta({ description: 'The token of the preview answer.' }),
});
export type BulkRequest = z.output<typeof bulkRequestSchema>;

export const bulkPreviewSchema = z.strictObject({
  action: z.enum(bulkActions),
  matched: z.number().int().nonnegative(),
  orderIds: z.array(orderIdSchema).meta({ description: 'The first 20 matched.' }),
  confirm: z.string(),
  expiresAt: timestamp,
});

export const bulkResultSchema = z.strictObject({
  action: z.enum(bulkActions),
  results: z.array(
    z.strictObject({
      orderId: orderIdSchema,
      status: z.union([z.literal(202), z.literal(404), z.literal(409)]),
      detail: z.string().optional(),
    }),
  ),
});
