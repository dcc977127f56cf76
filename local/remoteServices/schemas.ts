import { z } from 'zod';

/** The order data every operation receives (extra fields are allowed and ignored). */
export const orderLineSchema = z.object({
  sku: z.string().min(1),
  quantity: z.number().int().positive(),
  unitPrice: z.number().nonnegative(),
});

export const orderRequestSchema = z.looseObject({
  orderId: z.string().min(1),
  customerId: z.string().min(1),
  items: z.array(orderLineSchema).min(1),
  shippingAddress: z.union([z.string().min(1), z.looseObject({})]),
});

/** A compensation carries the order data plus the Idempotency-Key of the action it undoes. */
export const compensationRequestSchema = orderRequestSchema.extend({
  originalIdempotencyKey: z.string().min(1),
});

export type OrderRequest = z.infer<typeof orderRequestSchema>;
export type CompensationRequest = z.infer<typeof compensationRequestSchema>;

/** Service-wide faults, for chaos runs. Rates are probabilities per request. */
export const faultSettingsSchema = z.strictObject({
  transientRate: z.number().min(0).max(1).optional(),
  latencyMs: z.number().int().nonnegative().optional(),
  latencyJitterMs: z.number().int().nonnegative().optional(),
  hangRate: z.number().min(0).max(1).optional(),
  /** Seeds the PRNG behind the rates and the jitter, so a chaos run can be replayed. */
  seed: z.number().int().optional(),
  /**
   * Every operation (action and compensation) is answered with this status and no effect, until
   * cleared: a revoked credential (401), a missing permission (403), a wrong route (404)...
   */
  answerStatus: z.number().int().min(400).max(599).optional(),
  /** Webhook mode (a request with `callbackUrl`): how long after the 202 the outcome is POSTed. */
  callbackDelayMs: z.number().int().nonnegative().max(600_000).optional(),
  /** Each callback POSTed this many times (duplicates). */
  callbackCopies: z.number().int().min(1).max(5).optional(),
  /** Probability that an accepted request's callback is never sent (it is sent again on a retry). */
  callbackLossRate: z.number().min(0).max(1).optional(),
  /**
   * Loss (callbackLossRate) only for the first n attempts of a key, so the Supervisor's retries
   * always get their answer in the end (a chaos run bounds how often one order can lose it).
   */
  callbackLossAttempts: z.number().int().min(1).max(100).optional(),
  /** The callbacks of the first callbackLateAttempts attempts of a key are POSTed this late instead. */
  callbackLateMs: z.number().int().nonnegative().max(600_000).optional(),
  callbackLateAttempts: z.number().int().min(1).max(100).optional(),
  /** POST the callback before answering 202 (it beats the Agent's reply to the Scheduler). */
  callbackEarly: z.boolean().optional(),
  /** Sent as Retry-After (seconds) with `answerStatus`: a 429 storm that says when to come back. */
  retryAfterSeconds: z.number().int().min(0).max(3600).optional(),
});

export type FaultSettings = z.infer<typeof faultSettingsSchema>;

/** Reads FaultSettings from REMOTE_TRANSIENT_RATE, REMOTE_LATENCY_MS, REMOTE_LATENCY_JITTER_MS,
 * REMOTE_HANG_RATE and REMOTE_FAULT_SEED; throws naming the variable when one is malformed. */
export function faultSettingsFromEnv(env: Record<string, string | undefined> = process.env): FaultSettings {
  const names = {
    transientRate: 'REMOTE_TRANSIENT_RATE',
    latencyMs: 'REMOTE_LATENCY_MS',
    latencyJitterMs: 'REMOTE_LATENCY_JITTER_MS',
    hangRate: 'REMOTE_HANG_RATE',
    seed: 'REMOTE_FAULT_SEED',
  } as const;
  const raw: Record<string, number> = {};
  for (const [field, name] of Object.entries(names)) {
    const value = env[name]?.trim();
    if (!value) continue;
    const n = Number(value);
    if (!Number.isFinite(n)) throw new Error(`${name} must be a number, got "${value}"`);
    raw[field] = n;
  }
  const parsed = faultSettingsSchema.safeParse(raw);
  if (!parsed.success)
    throw new Error(`remote fault settings from the environment: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
