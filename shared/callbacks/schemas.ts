import { z } from 'zod';

/** The bodies of the waiting-step routes (callbackApi.ts, approvalApi.ts), also published in OpenAPI. */

/** A callback body is small: an outcome, a reference, a short result. */
export const maxCallbackBytes = 16 * 1024;

export const callbackBodySchema = z
  .strictObject({
    outcome: z
      .enum(['succeeded', 'failed'])
      .meta({ description: '`failed` is a business refusal: the order is undone like after a 422.' }),
    reference: z.string().min(1).max(200).optional().meta({ description: "The service's own reference." }),
    result: z.record(z.string(), z.unknown()).optional(),
    error: z
      .strictObject({ message: z.string().min(1).max(2000), code: z.string().max(100).optional() })
      .optional()
      .meta({ description: 'Why, for `failed`.' }),
  })
  .meta({ description: 'What a service that accepted the work of a waiting step POSTs when it is done.' });

export const heartbeatBodySchema = z.strictObject({
  progress: z.string().max(200).optional(),
});

export const callbackAnswerSchema = z.strictObject({
  status: z.enum(['applied', 'extended', 'duplicate']),
  orderId: z.string(),
  step: z.string(),
  attempt: z.number().int().min(1),
  completeBy: z.string().optional().meta({ description: 'A heartbeat: the step complete-by it moved to.' }),
});

export const approvalBodySchema = z.strictObject({
  decision: z.enum(['approve', 'refuse']),
  reason: z
    .string()
    .trim()
    .min(1)
    .max(500)
    .meta({ description: "Recorded in the order's history with who decided." }),
});
