import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import { isOrderId } from '../domain/orderId.js';
import type { Dependencies } from '../app/ports.js';
import { logger } from '../observability/logger.js';
import { ArchiveOffline, archiveContainer } from '../retention/archive.js';
import { requireOperator } from './operatorAuth.js';
import { badOrderId, notFound } from './orderApi.js';
import { problem, problemTypes } from './problem.js';

/**
 * Retention over HTTP: what a purged order answers (410 to a resubmission, its archive document to
 * an operator), legal holds, and the console's retention readout. Operator routes start with
 * requireOperator like every other.
 */
const noStore = { 'Cache-Control': 'no-store' };

/**
 * A resubmission whose order was purged: 410 Gone naming the archive, never a second order. The
 * submission finds out from its own create failing (the tombstone keeps the `order` row), so a new
 * order pays no extra read. Undefined when the order is not a purged one.
 */
export async function purgedSubmission(
  deps: Dependencies,
  orderId: string,
): Promise<HttpResponseInit | undefined> {
  const purged = await deps.retention?.purged(orderId);
  if (!purged) return undefined;
  const archive = purged.archiveBlob ? `${archiveContainer}/${purged.archiveBlob}` : undefined;
  return problem(
    410,
    problemTypes.purged,
    'Order purged',
    `The order this Idempotency-Key created finished and was purged on ${purged.purgedAt.toISOString()} ` +
      `under the retention policy; ${archive ? `its record is archived in ${archive}` : 'it was not archived'}. ` +
      'Nothing new was recorded. Use a new Idempotency-Key for a new order.',
    archive ? { archive } : {},
  );
}

/** GET of a purged order, for an operator: its archive document, marked archived. */
export async function purgedOrderView(
  deps: Dependencies,
  request: HttpRequest,
  orderId: string,
): Promise<HttpResponseInit | undefined> {
  if (!deps.retention || !requireOperator(request).ok) return undefined;
  const purged = await deps.retention.purged(orderId);
  if (!purged) return undefined;
  let document;
  try {
    document = await deps.retention.archived(purged);
  } catch (e) {
    if (e instanceof ArchiveOffline) return archiveOffline(e);
    throw e;
  }
  if (!document) {
    return problem(
      410,
      problemTypes.purged,
      'Order purged',
      `The order was purged on ${purged.purgedAt.toISOString()} without an archive (ORDER_ARCHIVE=off).`,
    );
  }
  return {
    status: 200,
    headers: noStore,
    jsonBody: {
      orderId,
      archived: true,
      purgedAt: purged.purgedAt.toISOString(),
      archive: `${archiveContainer}/${purged.archiveBlob}`,
      order: document.order,
      state: document.state,
      history: document.history,
    },
  };
}

/** 409: the archive blob must be rehydrated (an operator's action, hours) before it can be read. */
function archiveOffline(e: ArchiveOffline): HttpResponseInit {
  const archive = `${archiveContainer}/${e.blobName}`;
  return problem(
    409,
    problemTypes.archiveOffline,
    'Archive offline',
    `The order's archive blob ${archive} is in the archive tier and cannot be read until it is rehydrated ` +
      (e.rehydration
        ? `(rehydration under way: ${e.rehydration}; it takes up to 15 hours). `
        : `(up to 15 hours): az storage blob set-tier --container-name ${archiveContainer} --name ${e.blobName} ` +
          '--tier Cool --rehydrate-priority Standard --account-name <archive account> --auth-mode login. ') +
      'Then ask again.',
    { archive, ...(e.rehydration ? { rehydration: e.rehydration } : {}) },
  );
}

function holdBody(orderId: string, h: { heldBy: string; heldAt: Date; reason?: string } | null) {
  return h
    ? {
        orderId,
        held: true,
        heldBy: h.heldBy,
        heldAt: h.heldAt.toISOString(),
        ...(h.reason ? { reason: h.reason } : {}),
      }
    : { orderId, held: false };
}

async function holdAction(
  deps: Dependencies,
  request: HttpRequest,
  context: InvocationContext,
  place: boolean,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const orderId = request.params.orderId;
  if (!isOrderId(orderId)) return badOrderId(orderId);
  if (!deps.retention) throw new Error('retention is not configured');
  const now = deps.clock.now();
  const reason = request.query.get('reason')?.slice(0, 500);
  const log = logger(context, { actor: 'operator', orderId, operator: guard.operator.name });
  for (let attempt = 0; attempt < 5; attempt++) {
    const result = place
      ? await deps.retention.hold(orderId, guard.operator.name, now, reason)
      : await deps.retention.release(orderId, guard.operator.name, now);
    if (result === 'gone') return notFound(orderId);
    if (result === 'already') {
      return problem(
        409,
        problemTypes.conflict,
        place ? 'Already held' : 'Not held',
        place ? 'The order is already under a legal hold.' : 'The order is not under a legal hold.',
      );
    }
    if (result === 'done') {
      log.info(place ? 'legal hold placed' : 'legal hold released', { reason });
      return {
        status: 200,
        headers: noStore,
        jsonBody: holdBody(orderId, await deps.retention.holdOf(orderId)),
      };
    }
    // 'changed': the order moved meanwhile; read again.
  }
  return problem(503, problemTypes.busy, 'Busy', 'The order kept changing; retry.');
}

/** POST /api/orders/{id}/hold[?reason=]: retention skips the order until it is released. */
export function holdOrder(deps: Dependencies, request: HttpRequest, context: InvocationContext) {
  return holdAction(deps, request, context, true);
}

/** POST /api/orders/{id}/release: the order is subject to retention again. */
export function releaseOrder(deps: Dependencies, request: HttpRequest, context: InvocationContext) {
  return holdAction(deps, request, context, false);
}

/** GET /api/orders/retention: the oldest retained order, the backlog past retention, the last purge, held orders. */
export async function retentionReadout(
  deps: Dependencies,
  request: HttpRequest,
  _context?: InvocationContext,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  if (!deps.retention) throw new Error('retention is not configured');
  const r = await deps.retention.readout(deps.clock.now());
  return {
    status: 200,
    headers: noStore,
    jsonBody: {
      ...r,
      lastPurge: {
        ...(r.lastPurge.lastRunAt ? { lastRunAt: r.lastPurge.lastRunAt.toISOString() } : {}),
        ...(r.lastPurge.lastPurged !== undefined ? { lastPurged: r.lastPurge.lastPurged } : {}),
        ...(r.lastPurge.lastPurgedAt ? { lastPurgedAt: r.lastPurge.lastPurgedAt.toISOString() } : {}),
        ...(r.lastPurge.lastError ? { lastError: r.lastPurge.lastError } : {}),
      },
    },
  };
}
