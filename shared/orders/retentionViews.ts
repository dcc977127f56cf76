import { z } from 'zod';
import { orderIdSchema, processStateSchema } from './orderView.js';

/** What the retention routes answer (shared/http/retentionApi.ts), for the OpenAPI document. */
const isoDate = z.string().meta({ description: 'ISO 8601 date-time (UTC).' });

export const holdViewSchema = z
  .strictObject({
    orderId: orderIdSchema,
    held: z.boolean(),
    heldBy: z.string().optional(),
    heldAt: isoDate.optional(),
    reason: z.string().optional(),
  })
  .meta({ description: 'Whether the order is under a legal hold (retention skips it), and by whom.' });

export const archivedOrderViewSchema = z
  .strictObject({
    orderId: orderIdSchema,
    archived: z.literal(true),
    purgedAt: isoDate,
    archive: z.string().meta({ description: 'The archive blob (container/path) that holds the document.' }),
    order: z.record(z.string(), z.unknown()),
    state: z.record(z.string(), z.unknown()),
    history: z.array(z.record(z.string(), z.unknown())),
  })
  .meta({
    description: 'A purged order as archived: the order, its final state with its steps, its whole history.',
  });

export const retentionReadoutSchema = z
  .strictObject({
    orderRetentionDays: z.number().int().nonnegative(),
    idempotencyRetentionDays: z.number().int().nonnegative(),
    archive: z.boolean(),
    oldestRetained: z
      .strictObject({ orderId: orderIdSchema, processState: processStateSchema, since: isoDate })
      .nullable(),
    pastRetentionWaiting: z.number().int().nonnegative(),
    waitingCapped: z.boolean(),
    lastPurge: z.strictObject({
      lastRunAt: isoDate.optional(),
      lastPurged: z.number().int().nonnegative().optional(),
      lastPurgedAt: isoDate.optional(),
      lastError: z.string().optional(),
    }),
    held: z.array(
      z.strictObject({
        orderId: orderIdSchema,
        heldBy: z.string(),
        heldAt: isoDate,
        reason: z.string().optional(),
      }),
    ),
  })
  .meta({
    description:
      'Retention at a glance: the oldest retained order, what waits for the purge, the last purge, held orders.',
  });
