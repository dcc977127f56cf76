import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import { approvalBodySchema } from '../callbacks/schemas.js';
import { isOrderId, type OrderEvent } from '../domain/index.js';
import { applyEvent } from '../app/applyEvent.js';
import type { Dependencies } from '../app/ports.js';
import { carryOut } from '../messaging/commandMessages.js';
import {
  annotate,
  inSpan,
  linkToActive,
  orderAttributes,
  parentFrom,
  stateFields,
} from '../observability/tracing.js';
import { readJsonBody } from './jsonBody.js';
import { requireOperator } from './operatorAuth.js';
import { badOrderId, notFound, operatorLog, statusUrl } from './orderApi.js';
import { problem, problemTypes, validationProblem } from './problem.js';

/**
 * POST /api/orders/{orderId}/approval {decision: approve|refuse, reason}: an operator decides the
 * approval step the order waits on. Who and why go to the order's history (ApprovalDecided); a
 * refusal undoes the order like a business refusal. 409 when the order is not waiting for one.
 */
export async function decideApproval(
  deps: Dependencies,
  request: HttpRequest,
  context: InvocationContext,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const orderId = request.params.orderId;
  if (!isOrderId(orderId)) return badOrderId(orderId);
  const body = await readJsonBody(request, 4096);
  if (!body.ok) return body.response;
  const parsed = approvalBodySchema.safeParse(body.value);
  if (!parsed.success) {
    return validationProblem(
      parsed.error.issues.map((i) => ({ pointer: `/${i.path.join('/')}`, detail: i.message })),
      'Send {"decision": "approve" | "refuse", "reason": "..."}.',
    );
  }
  const event: OrderEvent = { type: 'ApprovalDecided', by: guard.operator.name, ...parsed.data };
  const log = operatorLog(context, orderId, event, guard.operator);
  annotate({ orderId });
  // The operator's request has a trace of its own: the order's trace links back to it.
  const requestLink = linkToActive({ 'order.link': 'operator-request' });
  const result = await applyEvent(deps, orderId, event, undefined, { historyInOrderTrace: true });
  if (result.kind === 'not-found') return notFound(orderId);
  if (result.kind !== 'applied') {
    const state = result.current.state;
    return problem(
      409,
      problemTypes.invalidState,
      'Not waiting for an approval',
      `The order is ${state.processState} and is not waiting for an operator's approval; nothing changed.`,
      { processState: state.processState },
    );
  }
  log.info('approval decided', { decision: parsed.data.decision, reason: parsed.data.reason });
  // The callback (or decision) and what it sends join the order's trace (from its submission).
  await inSpan(
    'approval decided',
    { attributes: orderAttributes(stateFields(result.state)), links: requestLink },
    () => carryOut(deps, result.commands, result.before.order, deps.clock.now(), log),
    parentFrom({ traceParent: result.before.traceParent }),
  ).catch((e: unknown) =>
    log.warn('recorded, but sending failed; the Supervisor will pick the order up', {
      error: (e as Error).message,
    }),
  );
  const location = statusUrl(request, orderId);
  return {
    status: 202,
    headers: { Location: location, 'Retry-After': '2', 'Cache-Control': 'no-store' },
    jsonBody: { orderId, processState: result.state.processState, statusUrl: location },
  };
}
