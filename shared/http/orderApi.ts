import { createHash, randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import {
  admission,
  decide,
  historyEntryFor,
  isOrderId,
  orderIdFromIdempotencyKey,
  outstandingCommands,
  processStates,
  type Order,
  type OrderEvent,
  type OrderState,
} from '../domain/index.js';
import { waivedSteps } from '../domain/waiting.js';
import { applyEvent } from '../app/applyEvent.js';
import type { Dependencies } from '../app/ports.js';
import { carryOut } from '../messaging/commandMessages.js';
import { logger, type Logger } from '../observability/logger.js';
import { recordSubmitted } from '../observability/orderMetrics.js';
import { activeTraceId, annotate, currentTraceParent, stateFields } from '../observability/tracing.js';
import { callerScope } from '../orders/callerScope.js';
import { parseOrderRequest, type OrderRequest } from '../orders/orderRequest.js';
import { orderSummary, orderView } from '../orders/orderView.js';
import { OrderAlreadyExists, type IndexFilter, type StoredOrder } from '../stateStore/index.js';
import { readJsonBody } from './jsonBody.js';
import { requireOperator, type Operator } from './operatorAuth.js';
import { problem, problemTypes, retryAfter, validationProblem } from './problem.js';
import { purgedOrderView, purgedSubmission } from './retentionApi.js';

/**
 * The HTTP side: submission, status, and the operator's list / resubmit / cancel. Handlers take
 * their dependencies, so tests drive them directly and functions/*.ts only register them. Every
 * operator handler starts with requireOperator: those routes are anonymous to the host.
 */

const idempotencyKeyPattern = /^[\x21-\x7e]{1,200}$/;
const continuationTokenPattern = /^[A-Za-z0-9_\-.~+/=]{1,2048}$/;
/** Seconds a client should wait before polling the status URL. */
const retryAfterSeconds = 2;

/**
 * A token this API handed out: base64 of the table SDK's `{nextPartitionKey, nextRowKey}`. Anything
 * else is refused here, because the SDK would throw decoding it (a 500 instead of a 400).
 */
export function isTableContinuationToken(token: string): boolean {
  if (!continuationTokenPattern.test(token)) return false;
  try {
    const decoded: unknown = JSON.parse(Buffer.from(token, 'base64').toString('utf8'));
    if (decoded === null || typeof decoded !== 'object' || Array.isArray(decoded)) return false;
    const entries = Object.entries(decoded);
    return (
      entries.length > 0 &&
      entries.every(([k, v]) => (k === 'nextPartitionKey' || k === 'nextRowKey') && typeof v === 'string') &&
      typeof (decoded as { nextPartitionKey?: unknown }).nextPartitionKey === 'string'
    );
  } catch {
    return false;
  }
}

export function statusUrl(request: HttpRequest, orderId: string): string {
  const url = new URL(request.url);
  return `${url.origin}/api/orders/${orderId}`;
}

function accepted(request: HttpRequest, state: OrderState): HttpResponseInit {
  const location = statusUrl(request, state.orderId);
  return {
    status: 202,
    headers: { Location: location, 'Retry-After': String(retryAfterSeconds), 'Cache-Control': 'no-store' },
    jsonBody: { orderId: state.orderId, processState: state.processState, statusUrl: location },
  };
}

/** Canonical JSON (sorted keys) so the same order sent twice hashes the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function requestHash(body: OrderRequest): string {
  return createHash('sha256').update(canonical(body)).digest('base64url');
}

/** Messages after a successful write: failing to send loses nothing (the Supervisor recovers). */
export async function sendAfterWrite(run: () => Promise<void>, log: Logger): Promise<void> {
  try {
    await run();
  } catch (e) {
    log.warn('recorded, but sending failed; the Supervisor will pick the order up', {
      error: (e as Error).message,
    });
  }
}

export function badOrderId(value: string | undefined): HttpResponseInit {
  return problem(
    400,
    problemTypes.validation,
    'Invalid order id',
    `Order ids are lower-case UUIDs; got ${JSON.stringify(String(value ?? '').slice(0, 80))}.`,
  );
}

export function notFound(orderId: string): HttpResponseInit {
  return problem(404, problemTypes.notFound, 'Order not found', `No order ${orderId} is recorded.`);
}

export async function submitOrder(
  deps: Dependencies,
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  const key = request.headers.get('idempotency-key');
  if (key !== null && !idempotencyKeyPattern.test(key)) {
    return problem(
      400,
      problemTypes.validation,
      'Invalid Idempotency-Key',
      'The Idempotency-Key header must be 1 to 200 visible ASCII characters.',
    );
  }
  const caller = callerScope((name) => request.headers.get(name));
  if (!caller.ok) return problem(400, problemTypes.validation, 'Invalid X-Client-Id', caller.detail);
  const body = await readJsonBody(request);
  if (!body.ok) return body.response;
  const parsed = parseOrderRequest(body.value);
  if (!parsed.ok) return validationProblem(parsed.errors);
  // A customer is named within its client's scope: two clients' customer "c-1" are not one.
  const customer = `${caller.scope ?? ''}/${parsed.value.customerId}`;
  return inCustomerLine(deps, customer, context, () =>
    recordSubmission(deps, request, context, key, caller.scope, customer, parsed.value),
  );
}

/**
 * Runs a submission in its customer's line at this instance (submissionLine.ts): a customer's
 * burst waits there, not ahead of every other customer's submissions. A full line is refused with
 * 429 and Retry-After, nothing recorded.
 */
async function inCustomerLine(
  deps: Dependencies,
  customer: string,
  context: InvocationContext,
  submit: () => Promise<HttpResponseInit>,
): Promise<HttpResponseInit> {
  const line = deps.submissionLine;
  if (!line) return submit();
  const turn = line.enter(customer);
  if (!turn) {
    logger(context, { actor: 'submission' }).warn("order refused: its customer's line is full", {
      atOnce: line.atOnce,
      waiting: line.maxWaiting,
    });
    return tooManyFromCustomer(
      `This instance is taking ${line.atOnce} orders of this customer and ${line.maxWaiting} more wait.`,
      1,
    );
  }
  const release = await turn;
  try {
    return await submit();
  } finally {
    release();
  }
}

async function recordSubmission(
  deps: Dependencies,
  request: HttpRequest,
  context: InvocationContext,
  key: string | null,
  callerScope: string | undefined,
  customer: string,
  parsed: OrderRequest,
): Promise<HttpResponseInit> {
  const now = deps.clock.now();
  const orderId = key !== null ? orderIdFromIdempotencyKey(key, callerScope) : randomUUID();
  const log = logger(context, { actor: 'submission', orderId });
  const order: Order = {
    orderId,
    ...parsed,
    requestHash: requestHash(parsed),
    ...(callerScope ? { callerScope } : {}),
    createdAt: now,
  };
  const recorded = key !== null ? await deps.store.load(orderId) : null;
  if (recorded) {
    // A replay: answer from what is recorded without writing anything (not even the index row
    // that a first submission writes before its transaction).
    return replayedSubmission(deps, request, order, log, recorded);
  }
  const refused = await atTheDoor(deps, now, log);
  if (refused) return refused;
  // Synchronously after the door's await: the turn is booked before any other submission's.
  const turn = customerTurn(deps, customer, now, log);
  if (!turn.ok) return turn.response;
  // An approval step holds only orders above its amount (domain/waiting.ts).
  const waive = waivedSteps(deps.workflows.latest.steps, order);
  const submitted: OrderEvent = {
    type: 'Submit',
    orderId,
    ...(waive.length > 0 ? { waive } : {}),
    ...(turn.notBefore ? { notBefore: turn.notBefore } : {}),
  };
  const decision = decide(deps.workflows, null, submitted, now, deps.policy);
  annotate(stateFields(decision.state));
  try {
    await deps.store.submit(order, decision.state, {
      history: {
        ...historyEntryFor(submitted, null, decision.state, now, decision.state.workflowVersion),
        ...activeTraceId(),
      },
      traceParent: currentTraceParent(),
    });
  } catch (e) {
    // Nothing recorded by this submission: its turn goes to the customer's next order.
    if (turn.booked) deps.customerIntake?.book.giveBack(customer);
    if (!(e instanceof OrderAlreadyExists)) throw e;
    const gone = await purgedSubmission(deps, orderId);
    if (gone) return gone;
    return replayedSubmission(deps, request, order, log);
  }
  recordSubmitted();
  annotate({ outcome: decision.state.processState });
  log.info('order recorded', { processState: decision.state.processState });
  await sendAfterWrite(() => carryOut(deps, decision.commands, order, now, log), log);
  return accepted(request, decision.state);
}

/**
 * The customer's turn at the intake (domain/customerIntake.ts), booked: when its order's claim
 * may reach the Scheduler. A turn further out than the limit is refused (429, Retry-After) and
 * books nothing: the customer's own backlog, not the system's, so not the door's 503.
 */
function customerTurn(
  deps: Dependencies,
  customerId: string,
  now: Date,
  log: Logger,
): { ok: true; booked: boolean; notBefore?: Date } | { ok: false; response: HttpResponseInit } {
  const pacing = deps.customerIntake;
  if (!pacing) return { ok: true, booked: false };
  const ahead = pacing.book.turnOf(customerId, now.getTime());
  if (ahead.delayMs > pacing.maxDelaySeconds * 1000) {
    const retryAfterSeconds = Math.ceil((ahead.delayMs - pacing.maxDelaySeconds * 1000) / 1000);
    log.warn("order refused: its customer's turn at the intake is too far out", {
      delaySeconds: Math.round(ahead.delayMs / 1000),
      limitSeconds: pacing.maxDelaySeconds,
    });
    const response = tooManyFromCustomer(
      `Orders of this customer are taken ${pacing.book.perSecond} a second; this one would wait ` +
        `${Math.round(ahead.delayMs / 1000)} s for its turn (limit ${pacing.maxDelaySeconds} s).`,
      retryAfterSeconds,
    );
    return { ok: false, response };
  }
  const turn = pacing.book.book(customerId, now.getTime());
  return { ok: true, booked: true, ...(turn.delayMs > 0 ? { notBefore: new Date(turn.at) } : {}) };
}

/** 429: the customer's own backlog (its line or its turn), not the system's; nothing recorded. */
function tooManyFromCustomer(why: string, retryAfterSeconds: number): HttpResponseInit {
  return retryAfter(
    problem(
      429,
      problemTypes.overloaded,
      'Too many orders from this customer right now',
      `${why} Nothing was recorded; retry after ${retryAfterSeconds} s with the same Idempotency-Key.`,
    ),
    retryAfterSeconds,
  );
}

/**
 * Refuses a new order, before anything is written, while the Scheduler's intake is further behind
 * than the door's limit (see domain/admission.ts); undefined when the order may come in.
 */
async function atTheDoor(deps: Dependencies, now: Date, log: Logger): Promise<HttpResponseInit | undefined> {
  if (!deps.door) return undefined;
  const reading = await deps.door.intake.read();
  if (!reading.known) {
    log.warn('scheduler backlog unknown; the door stays open', { error: reading.error });
    return undefined;
  }
  const verdict = admission(reading.oldestWaitingSince, now, deps.door.limitSeconds);
  if (verdict.open) return undefined;
  log.warn('order refused at the door: the Scheduler is behind', {
    backlogSeconds: verdict.backlogSeconds,
    limitSeconds: verdict.limitSeconds,
  });
  const response = problem(
    503,
    problemTypes.overloaded,
    'Not accepting new orders right now',
    `The oldest order waiting for a Scheduler has waited ${verdict.backlogSeconds} s (limit ` +
      `${verdict.limitSeconds} s). Nothing was recorded; retry after ${verdict.retryAfterSeconds} s ` +
      'with the same Idempotency-Key.',
  );
  return retryAfter(response, verdict.retryAfterSeconds);
}

/** The same Idempotency-Key again: the same order if the body matches, else a 409. */
async function replayedSubmission(
  deps: Dependencies,
  request: HttpRequest,
  order: Order,
  log: Logger,
  recorded?: StoredOrder,
): Promise<HttpResponseInit> {
  const existing = recorded ?? (await deps.store.load(order.orderId));
  if (!existing) throw new Error(`order ${order.orderId} exists but cannot be read`);
  if (existing.order.requestHash !== order.requestHash) {
    return problem(
      409,
      problemTypes.idempotencyConflict,
      'Idempotency-Key reused with a different body',
      // Names no order: the caller already has its id from the first answer, and naming it
      // would hand it to anyone else who shares this key space.
      'This Idempotency-Key was already used for a different order. Use a new key for a new order.',
    );
  }
  log.info('repeated submission; answering with the recorded order');
  if (existing.state.processState === 'Pending') {
    // The first request may have died between its write and its message: send it again.
    const now = deps.clock.now();
    const commands = outstandingCommands(deps.workflows, existing.state, now);
    await sendAfterWrite(() => carryOut(deps, commands, existing.order, now, log), log);
  }
  return accepted(request, existing.state);
}

/** A client reads the orders of its own caller scope; an operator reads every order. */
function mayRead(request: HttpRequest, scope: string, order: Order): boolean {
  return (order.callerScope ?? '') === scope || requireOperator(request).ok;
}

export async function getOrder(
  deps: Dependencies,
  request: HttpRequest,
  _context?: InvocationContext,
): Promise<HttpResponseInit> {
  const orderId = request.params.orderId;
  if (!isOrderId(orderId)) return badOrderId(orderId);
  const caller = callerScope((name) => request.headers.get(name));
  if (!caller.ok) return problem(400, problemTypes.validation, 'Invalid X-Client-Id', caller.detail);
  const loaded = await deps.store.load(orderId);
  if (!loaded) {
    const archived = await purgedOrderView(deps, request, orderId);
    if (archived) return archived;
  }
  // Another caller's order answers exactly as an unknown one: ids derived from (caller, key) can be
  // computed, so a different answer would confirm that the order exists.
  if (!loaded || !mayRead(request, caller.scope, loaded.order)) return notFound(orderId);
  return {
    status: 200,
    headers: { 'Cache-Control': 'no-store', ETag: `"${loaded.state.updatedAt.getTime()}"` },
    jsonBody: orderView(loaded.order, loaded.state),
  };
}

/** The list's and the bulk actions' filter, read from a query string; a problem when invalid. */
export function parseListFilter(
  get: (name: string) => string | null,
): { ok: true; filter: IndexFilter } | { ok: false; response: HttpResponseInit } {
  const bad = (title: string, detail: string) => ({
    ok: false as const,
    response: problem(400, problemTypes.validation, title, detail),
  });
  const rawState = get('state');
  const state = processStates.find((s) => s.toLowerCase() === rawState?.toLowerCase());
  if (!state) return bad('Invalid state', `Give ?state= one of ${processStates.join(', ')}.`);
  const filter: IndexFilter = { state };
  const version = get('workflowVersion');
  if (version !== null) {
    if (!/^[1-9][0-9]{0,5}$/.test(version))
      return bad('Invalid workflowVersion', 'workflowVersion is an integer from 1.');
    filter.workflowVersion = Number(version);
  }
  const customer = get('customerId');
  if (customer !== null) {
    if (customer.length < 1 || customer.length > 200)
      return bad('Invalid customerId', 'customerId is 1 to 200 characters.');
    filter.customerId = customer;
  }
  for (const name of ['from', 'to'] as const) {
    const raw = get(name);
    if (raw === null) continue;
    const at = new Date(raw);
    if (!/^\d{4}-\d{2}-\d{2}T/.test(raw) || Number.isNaN(at.getTime())) {
      return bad(`Invalid ${name}`, `${name} is an ISO 8601 date-time, e.g. 2030-01-01T00:00:00Z.`);
    }
    filter[name] = at;
  }
  if (filter.from && filter.to && filter.from > filter.to)
    return bad('Invalid time range', 'from is after to.');
  return { ok: true, filter };
}

export async function listOrders(
  deps: Dependencies,
  request: HttpRequest,
  _context?: InvocationContext,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const parsed = parseListFilter((name) => request.query.get(name));
  if (!parsed.ok) return parsed.response;
  const { filter } = parsed;
  const rawSize = request.query.get('pageSize');
  const pageSize = rawSize === null ? 50 : Number(rawSize);
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100) {
    return problem(
      400,
      problemTypes.validation,
      'Invalid pageSize',
      'pageSize must be an integer from 1 to 100.',
    );
  }
  const token = request.query.get('continuationToken') ?? undefined;
  if (token !== undefined && !isTableContinuationToken(token)) {
    return problem(
      400,
      problemTypes.validation,
      'Invalid continuationToken',
      'Pass the token from the previous page as is.',
    );
  }
  const page = await deps.store.listOrders(filter, token, pageSize);
  const body: Record<string, unknown> = { state: filter.state, orders: page.items.map(orderSummary) };
  if (page.continuationToken) {
    const next = new URL(request.url);
    next.search = '';
    next.searchParams.set('state', filter.state);
    if (filter.workflowVersion !== undefined)
      next.searchParams.set('workflowVersion', String(filter.workflowVersion));
    if (filter.customerId !== undefined) next.searchParams.set('customerId', filter.customerId);
    if (filter.from) next.searchParams.set('from', filter.from.toISOString());
    if (filter.to) next.searchParams.set('to', filter.to.toISOString());
    next.searchParams.set('pageSize', String(pageSize));
    next.searchParams.set('continuationToken', page.continuationToken);
    body.continuationToken = page.continuationToken;
    body.next = `${next.pathname}${next.search}`;
  }
  return { status: 200, headers: { 'Cache-Control': 'no-store' }, jsonBody: body };
}

/** One operator action on one order: what a single route and each line of a bulk run answer. */
export type OperatorOutcome =
  | { status: 202; state: OrderState }
  | { status: 404; detail: string }
  | { status: 409; detail: string; processState: OrderState['processState'] };

export async function applyOperatorEvent(
  deps: Dependencies,
  orderId: string,
  event: OrderEvent,
  conflictDetail: (state: OrderState) => string,
  log: Logger,
  precheck?: Parameters<typeof applyEvent>[3],
): Promise<OperatorOutcome> {
  // ETag-guarded like every transition: two operators (or two bulk runs) acting on the same
  // order apply once; the other re-reads, is refused, and answers 409.
  const result = await applyEvent(deps, orderId, event, precheck);
  switch (result.kind) {
    case 'not-found':
      return { status: 404, detail: `No order ${orderId} is recorded.` };
    case 'skipped':
      return { status: 409, detail: result.why, processState: result.current.state.processState };
    case 'refused': {
      const state = result.current.state;
      return { status: 409, detail: conflictDetail(state), processState: state.processState };
    }
    case 'applied': {
      log.info('operator action recorded', { to: result.state.processState });
      const now = deps.clock.now();
      await sendAfterWrite(() => carryOut(deps, result.commands, result.before.order, now, log), log);
      return { status: 202, state: result.state };
    }
  }
}

export function operatorLog(
  context: InvocationContext,
  orderId: string,
  event: OrderEvent,
  operator: Operator,
) {
  return logger(context, {
    actor: 'operator',
    orderId,
    action: event.type,
    operator: operator.name,
    operatorId: operator.id,
  });
}

async function operatorAction(
  deps: Dependencies,
  request: HttpRequest,
  context: InvocationContext,
  eventBy: (by: string) => OrderEvent,
  conflictDetail: (state: OrderState) => string,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const orderId = request.params.orderId;
  if (!isOrderId(orderId)) return badOrderId(orderId);
  const event = eventBy(guard.operator.name);
  const log = operatorLog(context, orderId, event, guard.operator);
  const outcome = await applyOperatorEvent(deps, orderId, event, conflictDetail, log);
  if (outcome.status === 404) return notFound(orderId);
  if (outcome.status === 409) {
    return problem(409, problemTypes.invalidState, 'Not allowed in this state', outcome.detail, {
      processState: outcome.processState,
    });
  }
  return accepted(request, outcome.state);
}

/** Why each operator action can be refused, for one order or each of a bulk run. */
export const conflictDetails = {
  resubmit: (s: OrderState) => `Only an order in Error can be resubmitted; this one is ${s.processState}.`,
  cancel: (s: OrderState) =>
    s.processState === 'Compensating'
      ? 'The order is already being compensated.'
      : `The order is already finished (${s.processState}); there is nothing to cancel.`,
  retry: (s: OrderState) =>
    s.processState === 'Pending'
      ? 'The order is already due (no back-off to skip); its claim is on its way.'
      : `Only a Pending order waiting out a back-off can be retried now; this one is ${s.processState}.`,
};

export function resubmitOrder(deps: Dependencies, request: HttpRequest, context: InvocationContext) {
  return operatorAction(
    deps,
    request,
    context,
    (by) => ({ type: 'OperatorResubmit', by }),
    conflictDetails.resubmit,
  );
}

export function cancelOrder(deps: Dependencies, request: HttpRequest, context: InvocationContext) {
  const reason = request.query.get('reason')?.slice(0, 200);
  return operatorAction(
    deps,
    request,
    context,
    (by) => ({ type: 'OperatorCancel', by, ...(reason ? { reason } : {}) }),
    conflictDetails.cancel,
  );
}

/** Skip the back-off of a Pending order: its claim goes out now (once; a second call is a 409). */
export function retryOrder(deps: Dependencies, request: HttpRequest, context: InvocationContext) {
  return operatorAction(
    deps,
    request,
    context,
    (by) => ({ type: 'OperatorRetry', by }),
    conflictDetails.retry,
  );
}
