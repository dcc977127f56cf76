import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import { z } from 'zod';
import {
  callbackVerdict,
  isOrderId,
  type CallbackVerdict,
  type HistoryEntry,
  type OrderEvent,
  type OrderState,
} from '../domain/index.js';
import { applyEvent } from '../app/applyEvent.js';
import type { Dependencies } from '../app/ports.js';
import { waitingSettings } from '../config/waitingSettings.js';
import { readJsonBody } from '../http/jsonBody.js';
import { problem, problemTypes, validationProblem } from '../http/problem.js';
import { carryOut } from '../messaging/commandMessages.js';
import { logger, type Logger } from '../observability/logger.js';
import {
  activeTraceId,
  annotate,
  inSpan,
  linkToActive,
  orderAttributes,
  parentFrom,
  stateFields,
  traceIdOf,
} from '../observability/tracing.js';
import { recordCallback, recordCallbackRefused } from '../observability/waitingMetrics.js';
import { historyEntryToRow } from '../stateStore/historyRows.js';
import { ordersTableOf } from '../stateStore/accounts.js';
import { verifyToken, type TokenClaims } from './token.js';

/**
 * POST /api/callbacks/{token} and /heartbeat: a remote service reports the outcome (or progress)
 * of the work it accepted for one attempt of one waiting step. The token is the only credential
 * (the route is anonymous to the host). Answers, all problem+json when not 2xx:
 * 202 applied; 200 duplicate (this outcome of this attempt is recorded); 409 the step moved on
 * (the answer is written to the order's history, nothing changes); 401 forged, altered or expired
 * token; 400 / 413 / 415 bad bodies.
 */

import { callbackBodySchema, heartbeatBodySchema, maxCallbackBytes } from './schemas.js';

export { maxCallbackBytes };
export type CallbackBody = z.infer<typeof callbackBodySchema>;

function refused(reason: string, detail: string): HttpResponseInit {
  recordCallbackRefused(reason);
  annotate({ outcome: `refused:${reason}` });
  return problem(401, problemTypes.unauthenticated, 'Callback token not accepted', detail);
}

/** The token's check: claims, or the 401 to answer (the reason is counted, never told in detail). */
function checkToken(
  request: HttpRequest,
  now: Date,
): { ok: true; claims: TokenClaims } | { ok: false; response: HttpResponseInit } {
  const token = request.params.token ?? '';
  const keys = waitingSettings().signingKeys;
  const check = verifyToken(keys, token, now);
  if (!check.ok) {
    const reason =
      check.reason === 'expired' ? 'expired' : check.reason === 'malformed' ? 'malformed' : 'forged';
    const detail =
      reason === 'expired'
        ? 'The token has expired (complete-by plus the grace has passed): nothing changed.'
        : 'The token is not one this app issued, or it was altered: nothing changed.';
    return { ok: false, response: refused(reason, detail) };
  }
  if (!isOrderId(check.claims.orderId))
    return { ok: false, response: refused('malformed', 'The token names no order.') };
  return { ok: true, claims: check.claims };
}

async function readBody<T>(
  request: HttpRequest,
  schema: z.ZodType<T>,
  optional: boolean,
): Promise<{ ok: true; value: T } | { ok: false; response: HttpResponseInit }> {
  const length = request.headers.get('content-length');
  if (optional && !request.headers.get('content-type') && (length === null || length === '0')) {
    return { ok: true, value: schema.parse({}) };
  }
  const body = await readJsonBody(request, maxCallbackBytes);
  if (!body.ok) {
    recordCallbackRefused(body.response.status === 413 ? 'too-large' : 'bad-body');
    return body;
  }
  const parsed = schema.safeParse(body.value);
  if (!parsed.success) {
    recordCallbackRefused('bad-body');
    return {
      ok: false,
      response: validationProblem(
        parsed.error.issues.slice(0, 10).map((i) => ({
          pointer: '/' + i.path.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/'),
          detail: i.message,
        })),
        'The callback body has invalid fields.',
      ),
    };
  }
  return { ok: true, value: parsed.data };
}

export async function receiveCallback(
  deps: Dependencies,
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  const token = checkToken(request, deps.clock.now());
  if (!token.ok) return token.response;
  const body = await readBody(request, callbackBodySchema, false);
  if (!body.ok) return body.response;
  const { claims } = token;
  const b = body.value;
  const event: OrderEvent = {
    type: 'CallbackAnswered',
    step: claims.step,
    run: claims.run,
    attempt: claims.attempt,
    outcome: b.outcome,
    ...(b.outcome === 'failed' ? { error: b.error?.message ?? 'refused by the service' } : {}),
  };
  return deliver(deps, context, claims, event, b.outcome, b.reference);
}

export async function receiveHeartbeat(
  deps: Dependencies,
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  const token = checkToken(request, deps.clock.now());
  if (!token.ok) return token.response;
  const body = await readBody(request, heartbeatBodySchema, true);
  if (!body.ok) return body.response;
  const { claims } = token;
  const event: OrderEvent = {
    type: 'StepHeartbeat',
    step: claims.step,
    run: claims.run,
    attempt: claims.attempt,
  };
  return deliver(deps, context, claims, event, 'heartbeat');
}

async function deliver(
  deps: Dependencies,
  context: InvocationContext,
  claims: TokenClaims,
  event: OrderEvent,
  kind: 'succeeded' | 'failed' | 'heartbeat',
  reference?: string,
): Promise<HttpResponseInit> {
  const log = logger(context, { actor: 'callback', orderId: claims.orderId }).with({
    step: claims.step,
    run: claims.run,
    attempt: claims.attempt,
  });
  annotate({ orderId: claims.orderId, step: claims.step, attempt: claims.attempt, run: claims.run });
  // The service's request has a trace of its own: the order's trace links back to it.
  const requestLink = linkToActive({ 'order.link': 'callback-request' });
  // Decided on every read the ETag-guarded write replaces: only the current attempt is applied.
  let verdict: CallbackVerdict = 'moved-on';
  const result = await applyEvent(
    deps,
    claims.orderId,
    event,
    (state) => {
      verdict = callbackVerdict(state, claims, kind);
      return verdict === 'apply' ? undefined : verdict;
    },
    { historyInOrderTrace: true },
  );
  const label = kind === 'heartbeat' ? 'heartbeat' : 'outcome';
  switch (result.kind) {
    case 'not-found':
      // Signed by us, so it named a real order: one since purged. Late, like any other.
      recordCallback('moved-on', label);
      return movedOn(claims, 'The order no longer exists.');
    case 'applied':
      recordCallback('applied', label);
      log.info(kind === 'heartbeat' ? 'heartbeat applied' : 'callback applied', {
        outcome: kind,
        to: result.state.processState,
        ...(reference ? { reference } : {}),
      });
      // The callback (or decision) and what it sends join the order's trace (from its submission).
      await inSpan(
        kind === 'heartbeat' ? 'callback heartbeat' : 'callback',
        { attributes: orderAttributes(stateFields(result.state)), links: requestLink },
        () => carryOut(deps, result.commands, result.before.order, deps.clock.now(), log),
        parentFrom({ traceParent: result.before.traceParent }),
      ).catch((e: unknown) =>
        log.warn('recorded, but sending failed; the Supervisor will pick the order up', {
          error: (e as Error).message,
        }),
      );
      return accepted(kind, result.state, claims);
    case 'refused': {
      // Not a token problem: the event does not fit the step (a heartbeat it does not declare).
      if (result.refusal.code === 'InvalidEvent' || result.refusal.code === 'UnknownStep') {
        recordCallbackRefused('not-applicable');
        return problem(400, problemTypes.validation, 'Not applicable to this step', result.refusal.message);
      }
      verdict = callbackVerdict(result.current.state, claims, kind);
      break;
    }
    case 'skipped':
      break;
  }
  if (verdict === 'duplicate') {
    recordCallback('duplicate', label);
    log.info('duplicate callback: this outcome of this attempt is recorded already');
    return {
      status: 200,
      headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' },
      jsonBody: { status: 'duplicate', orderId: claims.orderId, step: claims.step, attempt: claims.attempt },
    };
  }
  recordCallback('moved-on', label);
  const stored = result.kind === 'refused' || result.kind === 'skipped' ? result.current : undefined;
  const current = stored?.state;
  await recordLate(deps, claims, kind, current, log, stored?.traceParent);
  return movedOn(claims, current ? movedOnDetail(current, claims) : 'The step has moved on.');
}

function accepted(kind: string, state: OrderState, claims: TokenClaims): HttpResponseInit {
  const step = state.steps.find((s) => s.name === claims.step);
  return {
    status: 202,
    headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' },
    jsonBody: {
      status: kind === 'heartbeat' ? 'extended' : 'applied',
      orderId: claims.orderId,
      step: claims.step,
      attempt: claims.attempt,
      ...(kind === 'heartbeat' && step?.completeBy ? { completeBy: step.completeBy.toISOString() } : {}),
    },
  };
}

function movedOnDetail(state: OrderState, claims: TokenClaims): string {
  const step = state.steps.find((s) => s.name === claims.step);
  return `Attempt ${claims.attempt} of run ${claims.run} is no longer current (order ${state.processState}, step ${step?.status ?? 'unknown'} attempt ${step?.attempt ?? '?'} of run ${state.run}): the answer is recorded in the order's history and changes nothing.`;
}

function movedOn(claims: TokenClaims, detail: string): HttpResponseInit {
  return problem(409, problemTypes.invalidState, 'The step has moved on', detail, {
    orderId: claims.orderId,
    step: claims.step,
  });
}

/** The late answer goes to the order's history (its own row: no state changes, no ETag needed). */
async function recordLate(
  deps: Dependencies,
  claims: TokenClaims,
  kind: string,
  state: OrderState | undefined,
  log: Logger,
  traceParent?: string,
): Promise<void> {
  if (!state) return;
  const entry: HistoryEntry = {
    at: deps.clock.now(),
    actor: 'agent',
    event: kind === 'heartbeat' ? 'LateHeartbeat' : 'LateCallback',
    step: claims.step,
    attempt: claims.attempt,
    run: claims.run,
    workflow: state.workflow,
    workflowVersion: state.workflowVersion,
    outcome: state.processState,
    error: kind === 'heartbeat' ? 'heartbeat after the step moved on' : `late ${kind} callback: not applied`,
    // The order's trace, like the rows of the transitions around it.
    ...(traceIdOf(traceParent) ? { traceId: traceIdOf(traceParent) } : activeTraceId()),
  };
  try {
    await (
      await ordersTableOf(deps.store, claims.orderId)
    ).createEntity(historyEntryToRow(claims.orderId, entry));
  } catch (e) {
    log.warn('could not record the late callback in the history', { error: (e as Error).message });
  }
}
