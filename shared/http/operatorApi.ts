import { createHash } from 'node:crypto';
import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import {
  filterMismatch,
  isOrderId,
  type OrderEvent,
  type OrderState,
  type ProcessState,
} from '../domain/index.js';
import type { Dependencies } from '../app/ports.js';
import {
  bulkActions,
  bulkRequestSchema,
  historyEntryView,
  type BulkAction,
  type BulkRequest,
} from '../orders/operatorViews.js';
import { toFieldErrors } from '../orders/orderRequest.js';
import type { IndexFilter, StoredOrder } from '../stateStore/index.js';
import { readJsonBody } from './jsonBody.js';
import { requireOperator, type Operator } from './operatorAuth.js';
import {
  applyOperatorEvent,
  badOrderId,
  conflictDetails,
  isTableContinuationToken,
  notFound,
  operatorLog,
} from './orderApi.js';
import { problem, problemTypes, validationProblem } from './problem.js';

/**
 * The operator's console API beyond list/resubmit/cancel: an order's history, counts per state,
 * the changes feed, retry-now and the bulk actions. Every handler starts with requireOperator.
 */

const noStore = { 'Cache-Control': 'no-store' };
/** A change is listed once it is this old: an index entry is written just before its transition. */
const changesSettleMs = 2000;
const maxChanges = 200;
const bulkPreviewIds = 20;
const confirmTtlMs = 5 * 60_000;
const defaultBulkLimit = 100;

const badRequest = (title: string, detail: string) => problem(400, problemTypes.validation, title, detail);

export async function orderHistory(
  deps: Dependencies,
  request: HttpRequest,
  _context?: InvocationContext,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const orderId = request.params.orderId;
  if (!isOrderId(orderId)) return badOrderId(orderId);
  const rawSize = request.query.get('pageSize');
  const pageSize = rawSize === null ? 100 : Number(rawSize);
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000) {
    return badRequest('Invalid pageSize', 'pageSize must be an integer from 1 to 1000.');
  }
  const token = request.query.get('continuationToken') ?? undefined;
  if (token !== undefined && !isTableContinuationToken(token)) {
    return badRequest('Invalid continuationToken', 'Pass the token from the previous page as is.');
  }
  const page = await deps.store.history(orderId, pageSize, token);
  if (!page) return notFound(orderId);
  const body: Record<string, unknown> = { orderId, entries: page.items.map(historyEntryView) };
  if (page.continuationToken) {
    const next = new URL(request.url);
    next.search = '';
    next.searchParams.set('pageSize', String(pageSize));
    next.searchParams.set('continuationToken', page.continuationToken);
    body.continuationToken = page.continuationToken;
    body.next = `${next.pathname}${next.search}`;
  }
  return { status: 200, headers: noStore, jsonBody: body };
}

/** How long an order should stay in an in-flight state at most before the Supervisor acts. */
function boundSeconds(deps: Dependencies, state: ProcessState): number {
  const p = deps.policy;
  if (state === 'Processing') return p.stepTimeoutSeconds;
  if (state === 'Pending') return p.claimTimeoutSeconds + p.extendedBackoffSeconds;
  return p.stepTimeoutSeconds + p.extendedBackoffSeconds;
}

export async function orderCounts(
  deps: Dependencies,
  request: HttpRequest,
  _context?: InvocationContext,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const [counts, oldest] = await Promise.all([deps.store.countsPerState(), deps.store.oldestInFlight()]);
  const now = deps.clock.now();
  return {
    status: 200,
    headers: noStore,
    jsonBody: {
      counts,
      inFlight: counts.Pending + counts.Processing + counts.Compensating,
      oldestInFlight: oldest
        ? {
            orderId: oldest.orderId,
            processState: oldest.processState,
            ageSeconds: Math.max(0, Math.round((now.getTime() - oldest.stateSince.getTime()) / 1000)),
            boundSeconds: boundSeconds(deps, oldest.processState),
          }
        : null,
      asOf: now.toISOString(),
    },
  };
}

export async function orderChanges(
  deps: Dependencies,
  request: HttpRequest,
  _context?: InvocationContext,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const until = new Date(deps.clock.now().getTime() - changesSettleMs);
  const after = request.query.get('after');
  if (after === null)
    return { status: 200, headers: noStore, jsonBody: { changes: [], cursor: String(until.getTime()) } };
  if (!/^[0-9]{1,13}$/.test(after)) {
    return badRequest('Invalid after', 'Pass the cursor of the previous answer as is.');
  }
  // A cursor older than a day would read a day of changes: start again from a fresh list instead.
  const from = new Date(Math.max(Number(after), until.getTime() - 86_400_000));
  // The cursor is where the store says every change is reported up to: not the last one shown
  // (a page may end inside a burst) and not `until` (entries it could not confirm still count).
  const { changes, through } =
    from < until ? await deps.store.changes(from, until, maxChanges) : { changes: [], through: until };
  const cursor = Math.max(from.getTime(), through.getTime());
  return {
    status: 200,
    headers: noStore,
    jsonBody: {
      changes: changes.map((c) => ({ ...c, updatedAt: c.updatedAt.toISOString() })),
      cursor: String(cursor),
    },
  };
}

function filterOf(f: BulkRequest['filter']): IndexFilter {
  return {
    state: f.state,
    ...(f.workflowVersion !== undefined ? { workflowVersion: f.workflowVersion } : {}),
    ...(f.customerId !== undefined ? { customerId: f.customerId } : {}),
    ...(f.from !== undefined ? { from: new Date(f.from) } : {}),
    ...(f.to !== undefined ? { to: new Date(f.to) } : {}),
  };
}

/**
 * The confirmation token: binds the operator, action, filter and limit to an expiry. It makes an
 * operator look at what a bulk action would touch before it does; it is not a secret (the caller
 * is already an operator), so a hash is enough.
 */
function confirmToken(operator: Operator, action: BulkAction, body: BulkRequest, expires: number): string {
  const digest = createHash('sha256')
    .update(JSON.stringify([operator.id, action, body.filter, body.limit ?? defaultBulkLimit, expires]))
    .digest('base64url')
    .slice(0, 32);
  return `${expires}.${digest}`;
}

function eventFor(action: BulkAction, by: string): OrderEvent {
  if (action === 'resubmit') return { type: 'OperatorResubmit', by };
  if (action === 'cancel') return { type: 'OperatorCancel', by, reason: 'bulk cancel' };
  return { type: 'OperatorRetry', by };
}

/**
 * Each order is checked against the filter again when the run reaches it, on the rows the write
 * replaces under their ETag: the list is up to tens of seconds old by then (bounded rate).
 */
function stillMatches(filter: IndexFilter) {
  return (state: OrderState, _now: Date, stored: StoredOrder): string | undefined => {
    const why = filterMismatch(filter, {
      processState: state.processState,
      customerId: stored.order.customerId,
      workflowVersion: state.workflowVersion,
      stateSince: stored.stateSince ?? state.updatedAt,
    });
    return why === undefined ? undefined : `No longer matches the filter: ${why}. Left untouched.`;
  };
}

async function matching(deps: Dependencies, filter: IndexFilter, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let token: string | undefined;
  do {
    const page = await deps.store.listOrders(filter, token, Math.min(100, limit - ids.length));
    ids.push(...page.items.map((o) => o.orderId));
    token = page.continuationToken;
  } while (token && ids.length < limit);
  return ids.slice(0, limit);
}

export async function bulkAction(
  deps: Dependencies,
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const action = bulkActions.find((a) => a === request.params.action);
  if (!action) return badRequest('Invalid action', `The action is one of ${bulkActions.join(', ')}.`);
  const raw = await readJsonBody(request);
  if (!raw.ok) return raw.response;
  const parsed = bulkRequestSchema.safeParse(raw.value);
  if (!parsed.success) {
    return validationProblem(toFieldErrors(parsed.error));
  }
  const body = parsed.data;
  if (body.filter.from && body.filter.to && body.filter.from > body.filter.to) {
    return badRequest('Invalid time range', 'filter.from is after filter.to.');
  }
  const limit = body.limit ?? defaultBulkLimit;
  const filter = filterOf(body.filter);
  const now = deps.clock.now().getTime();

  if (body.confirm === undefined) {
    const ids = await matching(deps, filter, limit);
    const expires = now + confirmTtlMs;
    return {
      status: 200,
      headers: noStore,
      jsonBody: {
        action,
        matched: ids.length,
        orderIds: ids.slice(0, bulkPreviewIds),
        confirm: confirmToken(guard.operator, action, body, expires),
        expiresAt: new Date(expires).toISOString(),
      },
    };
  }
  const expires = Number(body.confirm.split('.')[0]);
  if (
    !Number.isSafeInteger(expires) ||
    expires < now ||
    body.confirm !== confirmToken(guard.operator, action, body, expires)
  ) {
    return problem(
      409,
      problemTypes.invalidState,
      'Confirmation expired or does not match',
      'Send the same request without `confirm`, check what it matches, then send it with the new token (valid 5 minutes, for the same action, filter and limit).',
    );
  }
  // The orders matching NOW: an order that left the state since the preview is not touched, and
  // one that leaves it while the run works through the list is skipped when the run reaches it.
  const ids = await matching(deps, filter, limit);
  const intervalMs = 1000 / (deps.operatorBulkRatePerSecond ?? 20);
  const results: Array<{ orderId: string; status: 202 | 404 | 409; detail?: string }> = [];
  const started = Date.now();
  for (const [i, orderId] of ids.entries()) {
    const wait = started + i * intervalMs - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const event = eventFor(action, guard.operator.name);
    const outcome = await applyOperatorEvent(
      deps,
      orderId,
      event,
      conflictDetails[action],
      operatorLog(context, orderId, event, guard.operator),
      stillMatches(filter),
    );
    results.push(
      outcome.status === 202
        ? { orderId, status: 202 }
        : { orderId, status: outcome.status, detail: outcome.detail },
    );
  }
  return { status: 200, headers: noStore, jsonBody: { action, results } };
}
