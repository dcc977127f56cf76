import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import { RestError, type TableClient } from '@azure/data-tables';
import { z } from 'zod';
import type { Dependencies } from '../app/ports.js';
import { bodyPreview, deadLetterDetail, orderNamedBy, type DeadLetterSource } from '../domain/deadLetters.js';
import {
  deadLetterSourceList,
  findDeadLetterSource,
  sequenceText,
  type DeadLetter,
  type DeadLetterQueues,
  type TakeOutcome,
} from '../messaging/deadLetters.js';
import { logger, type Logger } from '../observability/logger.js';
import { orderRowKey } from '../stateStore/rows.js';
import { historyEntryToRow } from '../stateStore/historyRows.js';
import { ordersTableOf } from '../stateStore/accounts.js';
import { activeTraceId } from '../observability/tracing.js';
import { poisonProperties } from '../messaging/quarantine.js';
import type { Operator } from './operatorAuth.js';
import { requireOperator } from './operatorAuth.js';
import { readJsonBody } from './jsonBody.js';
import { problem, problemTypes, validationProblem, type FieldError } from './problem.js';

/**
 * The operator's dead-letter routes: counts per source, the dead letters of one source, and
 * redrive / discard of chosen ones (docs/operations.md, "Dead letters"). Every one needs an operator.
 */

export const deadLetterEntityNames = deadLetterSourceList.map((s) => s.name) as [string, ...string[]];
/** Dead letters one request may act on. */
export const maxSequenceNumbers = 100;
/** Dead letters one page lists at most (default 50). */
export const maxTop = 100;

const entitySchema = z
  .enum(deadLetterEntityNames)
  .meta({ description: 'A queue, or a subscription as `topic/subscriptions/name`.' });
// At most 18 digits: always a valid (positive) 64-bit sequence number.
const sequenceNumberSchema = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,17})$/)
  .meta({ description: "A dead letter's sequence number, as a decimal string (64-bit)." });

export const deadLetterActionSchema = z.strictObject({
  entity: entitySchema,
  sequenceNumbers: z.array(sequenceNumberSchema).min(1).max(maxSequenceNumbers),
});

export const deadLetterCountsSchema = z.strictObject({
  entities: z.array(
    z.strictObject({
      entity: z.string(),
      count: z.number().int().min(0),
      capped: z
        .boolean()
        .meta({ description: 'True when counting stopped at 1,000: there are at least `count`.' }),
    }),
  ),
});

export const deadLetterMessageSchema = z.strictObject({
  sequenceNumber: sequenceNumberSchema,
  messageId: z.string().nullable(),
  reason: z.string().nullable(),
  description: z.string().nullable(),
  deliveryCount: z.number().int().min(0).nullable(),
  enqueuedAt: z.iso.datetime().nullable(),
  orderId: z.string().nullable().meta({ description: 'The order the message names, if any.' }),
  subject: z.string().nullable(),
  origin: z.string().nullable().meta({
    description:
      'For a poison message quarantined on its first delivery (entity `poison`): the queue it arrived on, where a redrive sends it back.',
  }),
  body: z.string().meta({ description: 'The body as text (JSON as JSON), cut at 4,000 characters.' }),
  bodyTruncated: z.boolean(),
});

export const deadLetterPageSchema = z.strictObject({
  entity: z.string(),
  messages: z.array(deadLetterMessageSchema),
});

export const deadLetterResultsSchema = z.strictObject({
  results: z.array(
    z.strictObject({
      sequenceNumber: sequenceNumberSchema,
      status: z.enum(['redriven', 'discarded', 'not-found']),
      newMessageId: z.string().optional().meta({ description: 'The id of the copy a redrive sent.' }),
      orderId: z.string().optional(),
      detail: z.string().optional(),
    }),
  ),
});

type Results = z.infer<typeof deadLetterResultsSchema>['results'];

const ok = (jsonBody: unknown): HttpResponseInit => ({
  status: 200,
  headers: { 'Cache-Control': 'no-store' },
  jsonBody,
});

function queues(deps: Dependencies): DeadLetterQueues {
  if (!deps.deadLetters) throw new Error('no dead-letter access configured');
  return deps.deadLetters;
}

function pointerOf(path: PropertyKey[]): string {
  return '/' + path.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
}

function unknownEntity(value: string | null): HttpResponseInit {
  return problem(
    400,
    problemTypes.validation,
    'Invalid entity',
    `Give ?entity= one of ${deadLetterEntityNames.join(', ')}; got ${JSON.stringify(String(value ?? '').slice(0, 80))}.`,
  );
}

export async function deadLetterCounts(
  deps: Dependencies,
  request: HttpRequest,
  _context?: InvocationContext,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const dlq = queues(deps);
  const entities = await Promise.all(
    deadLetterSourceList.map(async (source) => ({ entity: source.name, ...(await dlq.count(source)) })),
  );
  return ok({ entities });
}

function messageView(m: DeadLetter) {
  const body = bodyPreview(m.body);
  return {
    sequenceNumber: sequenceText(m),
    messageId: m.messageId === undefined ? null : String(m.messageId),
    reason: m.deadLetterReason ?? null,
    description: m.deadLetterErrorDescription ?? null,
    deliveryCount: m.deliveryCount ?? null,
    enqueuedAt: m.enqueuedTimeUtc ? m.enqueuedTimeUtc.toISOString() : null,
    orderId: orderNamedBy(m.correlationId, m.body),
    subject: m.subject ?? null,
    origin:
      typeof m.applicationProperties?.[poisonProperties.entity] === 'string'
        ? m.applicationProperties[poisonProperties.entity]
        : null,
    body: body.text,
    bodyTruncated: body.truncated,
  };
}

export async function deadLetterMessages(
  deps: Dependencies,
  request: HttpRequest,
  _context?: InvocationContext,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const name = request.query.get('entity');
  const source = name === null ? undefined : findDeadLetterSource(name);
  if (!source) return unknownEntity(name);
  const rawTop = request.query.get('top');
  const top = rawTop === null ? 50 : Number(rawTop);
  if (!Number.isInteger(top) || top < 1 || top > maxTop) {
    return problem(
      400,
      problemTypes.validation,
      'Invalid top',
      `top must be an integer from 1 to ${maxTop}.`,
    );
  }
  const messages = await queues(deps).peek(source, top);
  return ok({ entity: source.name, messages: messages.map(messageView) });
}

/** Records the action in the order's history; the action stands even if this fails. */
async function recordInHistory(
  deps: Dependencies,
  orderId: string,
  event: 'DeadLetterRedriven' | 'DeadLetterDiscarded',
  operator: Operator,
  detail: string,
  log: Logger,
): Promise<void> {
  let orders: TableClient;
  try {
    // Only into an order that exists: a dead letter may name an order that never was.
    orders = await ordersTableOf(deps.store, orderId);
    await orders.getEntity(orderId, orderRowKey, { queryOptions: { select: ['PartitionKey'] } });
  } catch (e) {
    if (e instanceof RestError && e.statusCode === 404) return;
    log.warn('dead letter handled, but its order could not be read for the history', {
      orderId,
      error: (e as Error).message,
    });
    return;
  }
  try {
    await orders.createEntity(
      historyEntryToRow(orderId, {
        at: deps.clock.now(),
        actor: 'operator',
        by: operator.name,
        event,
        outcome: event === 'DeadLetterRedriven' ? 'redriven' : 'discarded',
        error: detail,
        ...activeTraceId(),
      }),
    );
  } catch (e) {
    log.warn('dead letter handled, but its history entry could not be written', {
      orderId,
      error: (e as Error).message,
    });
  }
}

async function deadLetterAction(
  deps: Dependencies,
  request: HttpRequest,
  context: InvocationContext,
  action: 'redrive' | 'discard',
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const body = await readJsonBody(request);
  if (!body.ok) return body.response;
  const parsed = deadLetterActionSchema.safeParse(body.value);
  if (!parsed.success) {
    const errors: FieldError[] = parsed.error.issues.map((i) => ({
      pointer: pointerOf(i.path),
      detail: i.message,
    }));
    return validationProblem(
      errors,
      `Send { entity: one of ${deadLetterEntityNames.join(', ')}, sequenceNumbers: 1 to ${maxSequenceNumbers} decimal strings }.`,
    );
  }
  const source = findDeadLetterSource(parsed.data.entity) as DeadLetterSource;
  const log = logger(context, {
    actor: 'operator',
    action: `deadletter-${action}`,
    entity: source.name,
    operator: guard.operator.name,
    operatorId: guard.operator.id,
  });
  const dlq = queues(deps);
  const outcomes =
    action === 'redrive'
      ? await dlq.redrive(source, parsed.data.sequenceNumbers)
      : await dlq.discard(source, parsed.data.sequenceNumbers);
  const results: Results = [];
  for (const seq of new Set(parsed.data.sequenceNumbers)) {
    const outcome: TakeOutcome = outcomes.get(seq) ?? { status: 'not-found', detail: 'Not looked at.' };
    if (outcome.status === 'not-found') {
      results.push({ sequenceNumber: seq, status: 'not-found', detail: outcome.detail });
      continue;
    }
    const m = outcome.message;
    const orderId = orderNamedBy(m.correlationId, m.body);
    const status = action === 'redrive' ? 'redriven' : 'discarded';
    log.info(`dead letter ${status}`, {
      sequenceNumber: seq,
      messageId: m.messageId === undefined ? undefined : String(m.messageId),
      newMessageId: outcome.newMessageId,
      orderId: orderId ?? undefined,
      reason: m.deadLetterReason,
    });
    if (orderId) {
      const detail = deadLetterDetail(source.name, seq, m.deadLetterReason, m.deadLetterErrorDescription);
      await recordInHistory(
        deps,
        orderId,
        action === 'redrive' ? 'DeadLetterRedriven' : 'DeadLetterDiscarded',
        guard.operator,
        detail,
        log,
      );
    }
    results.push({
      sequenceNumber: seq,
      status,
      ...(outcome.newMessageId ? { newMessageId: outcome.newMessageId } : {}),
      ...(orderId ? { orderId } : {}),
      ...(outcome.detail ? { detail: outcome.detail } : {}),
    });
  }
  return ok({ results });
}

export function redriveDeadLetters(deps: Dependencies, request: HttpRequest, context: InvocationContext) {
  return deadLetterAction(deps, request, context, 'redrive');
}

export function discardDeadLetters(deps: Dependencies, request: HttpRequest, context: InvocationContext) {
  return deadLetterAction(deps, request, context, 'discard');
}
