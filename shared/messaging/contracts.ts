import { z } from 'zod';
import { processOrderReasons } from '../domain/commands.js';
import { isOrderId, orderIdPattern } from '../domain/orderId.js';

/**
 * The bodies of every message the app sends, validated on receipt. A body that fails its
 * schema is dead-lettered with the reason (see `describeInvalidMessage`), never retried.
 */

/**
 * The state store's own rule (domain/orderId.ts), not merely "a UUID": an id the store would refuse
 * (upper case, the nil UUID) must fail here, on receipt, as poison, not deep in a handler that
 * throws on every delivery until the broker gives up without an alert.
 */
export const orderIdSchema = z.string().regex(orderIdPattern, 'not an order id (a lower-case RFC 9562 UUID)');
const stepName = z.string().regex(/^[a-z][a-z0-9-]{0,31}$/);
const attempt = z.number().int().min(1).max(1000);
const run = z.number().int().min(1).max(1000);
const isoDate = z.iso.datetime({ offset: true });
const kind = z.enum(['do', 'compensate']);

/** Scheduler queue: start or resume an order from its recorded state. */
export const processOrderSchema = z
  .object({
    type: z.literal('process-order'),
    orderId: orderIdSchema,
    reason: z.enum(processOrderReasons),
  })
  .strict();

/**
 * Scheduler queue: an Agent's answer for one attempt of one step. `failed` is a business refusal
 * (the order is undone); `stalled` is an operational failure (credentials, route, throttling,
 * 5xx): recorded on the step, which stays in flight until its complete-by. `not-started`: the
 * request waited in the Agent's queue until it could no longer start in time; no call was made.
 */
export const agentReplySchema = z
  .object({
    type: z.literal('agent-reply'),
    orderId: orderIdSchema,
    run,
    step: stepName,
    kind,
    attempt,
    /**
     * `accepted`: a callback step's service took the work (202) and will call back. `waiting`: no
     * call slot yet (issue 26); the request went back to its queue.
     */
    outcome: z.enum(['succeeded', 'failed', 'stalled', 'not-started', 'accepted', 'waiting']),
    reference: z.string().max(200).optional(),
    result: z.unknown().optional(),
    /** `waiting`: the complete-by the re-sent request carries (the wait for a call slot added). */
    completeBy: isoDate.optional(),
    error: z
      .object({ status: z.number().int().optional(), message: z.string().max(2000) })
      .strict()
      .optional(),
  })
  .strict();

export const schedulerMessageSchema = z.discriminatedUnion('type', [processOrderSchema, agentReplySchema]);

/** An Agent's queue: do (or undo) one step before completeBy. */
export const agentRequestSchema = z
  .object({
    type: z.literal('agent-request'),
    orderId: orderIdSchema,
    run,
    step: stepName,
    kind,
    action: z.string().regex(/^[a-z][a-z0-9-]{0,63}$/),
    attempt,
    completeBy: isoDate,
    idempotencyKey: z.string().min(1).max(200),
    /** A callback step: the token the Agent mints for the service is valid until then (plus grace). */
    callbackUntil: isoDate.optional(),
    payload: z.record(z.string(), z.unknown()),
    /** Sent back to wait for a call slot (issue 26): since when, and how often. */
    waitingSince: isoDate.optional(),
    waits: z.number().int().min(1).max(100_000).optional(),
  })
  .strict();

/** order-status topic: what a client app follows instead of polling. */
export const orderStatusEventSchema = z
  .object({
    type: z.literal('order-status'),
    orderId: orderIdSchema,
    event: z.string().max(40),
    processState: z.string().max(40),
    step: stepName.optional(),
    at: isoDate,
    detail: z.string().max(2000).optional(),
  })
  .strict();

/** operator-alerts queue: an order a person has to look at. */
export const operatorAlertSchema = z
  .object({
    type: z.literal('operator-alert'),
    orderId: z.string().max(200),
    reason: z.string().max(2000),
    processState: z.string().max(40).optional(),
    failureCount: z.number().int().min(0).optional(),
    /** A service outage's alert (orderId `service:<name>`): the service and its last answer. */
    service: z.string().max(100).optional(),
    status: z.number().int().optional(),
    consecutiveFailures: z.number().int().min(0).optional(),
    at: isoDate,
  })
  .strict();

export type ProcessOrderMessage = z.infer<typeof processOrderSchema>;
export type AgentReplyMessage = z.infer<typeof agentReplySchema>;
export type SchedulerMessage = z.infer<typeof schedulerMessageSchema>;
export type AgentRequestMessage = z.infer<typeof agentRequestSchema>;

/** The Agent's reply to a request: the request's order, run, step, kind and attempt, with an outcome. */
export function replyTo(
  request: AgentRequestMessage,
  outcome: AgentReplyMessage['outcome'],
): AgentReplyMessage {
  const { orderId, run, step, kind, attempt } = request;
  return { type: 'agent-reply', orderId, run, step, kind, attempt, outcome };
}
export type OrderStatusEvent = z.infer<typeof orderStatusEventSchema>;
export type OperatorAlert = z.infer<typeof operatorAlertSchema>;

export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string; orderId?: string };

/** Largest message body we accept; ours are a few KiB. */
export const maxMessageBytes = 64 * 1024;

/**
 * Validates a received body (already JSON-parsed by the host, or a string/Buffer). On failure
 * it returns a reason fit for DeadLetterErrorDescription and the orderId when one is readable,
 * so the order can be made visible to operators.
 */
export function parseMessage<T>(schema: z.ZodType<T>, body: unknown): Parsed<T> {
  let value = body;
  if (typeof value === 'string' || Buffer.isBuffer(value) || value instanceof Uint8Array) {
    const text = Buffer.from(value as Uint8Array).toString('utf8');
    if (text.length > maxMessageBytes)
      return { ok: false, reason: `body larger than ${maxMessageBytes} bytes` };
    try {
      value = JSON.parse(text);
    } catch {
      return { ok: false, reason: 'body is not JSON' };
    }
  }
  const result = schema.safeParse(value);
  if (result.success) return { ok: true, value: result.data };
  const reason = result.error.issues
    .slice(0, 5)
    .map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`)
    .join('; ');
  return { ok: false, reason: reason.slice(0, 1000), orderId: orderNamedBy(value) };
}

/**
 * The order a refused body means, for the operator's alert: its id, or the order it names in the
 * wrong case (an upper-case copy of a real id still points an operator at that order).
 */
function orderNamedBy(value: unknown): string | undefined {
  const candidate = (value as { orderId?: unknown } | null)?.orderId;
  if (typeof candidate !== 'string') return undefined;
  const folded = candidate.toLowerCase();
  return isOrderId(folded) ? folded : undefined;
}
