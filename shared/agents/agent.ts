import type { InvocationContext } from '@azure/functions';
import {
  meaningOf,
  notStartedReplyId,
  reportsNotStarted,
  startMarginFor,
  type Clock,
  type RefusalDeclaration,
} from '../domain/index.js';
import {
  agentRequestSchema,
  parseMessage,
  replyTo,
  type AgentReplyMessage,
  type AgentRequestMessage,
} from '../messaging/contracts.js';
import { queues } from '../messaging/entities.js';
import type { MessageBus } from '../messaging/bus.js';
import { rejectPoison } from '../messaging/poison.js';
import { logger } from '../observability/logger.js';
import { recordRemoteFailure, recordStepCall } from '../observability/orderMetrics.js';
import { annotate, inSpan, orderAttributes, SpanKind } from '../observability/tracing.js';
import {
  callRemoteService,
  lastStatusOf,
  type RemoteCallPolicyOptions,
  type RemoteCallResult,
} from './remoteServiceClient.js';
import type { OutageWatch } from './outageWatch.js';
import { callbackUrlFor, referenceOf } from '../callbacks/callbackUrl.js';
import type { ServiceCallGate } from './callBudget.js';
import { sendBackToWait } from './waitForSlot.js';
import { letGateWake, onPullToken, pullTurn, readAheadOf } from './pullWaiting.js';
import { maxReadAhead } from './pullAhead.js';
import { whenOnTheWire } from './onTheWire.js';
import { isPullToken } from './pullToken.js';
import { customerOf, requestFields, requestIdOf } from './requestOf.js';

/**
 * An Agent: wraps one remote service. It performs (or undoes) one step before the step's
 * complete-by and answers the Scheduler. Once it has started, at complete-by it stops and sends
 * nothing, not even an error: the Supervisor owns what happens next. A request it reads too late to
 * start gets a `not-started` reply instead (no call). Agents never touch the state store.
 */
export interface AgentDependencies {
  bus: MessageBus;
  clock: Clock;
  /** Base URL of the remote service this Agent wraps. */
  serviceUrl: string;
  /** Which of the service's answers are business refusals; every other failure stalls. */
  refusals: RefusalDeclaration;
  /** The service's name in alerts and logs; default the Agent's queue. */
  service?: string;
  /** Counts consecutive operational failures at the service and alerts once per outage. */
  outages?: OutageWatch;
  callPolicy?: Partial<RemoteCallPolicyOptions>;
  /** Fires when the host shuts down: the call stops like at the deadline. */
  signal?: AbortSignal;
  /** A request's window (the policy's step timeout): bounds the start margin. */
  stepTimeoutSeconds?: number;
  /** The service's global call budget (issue 26): a request without a slot goes back to wait. */
  budget?: ServiceCallGate;
}

/** How long this process's recent calls took, per Agent queue (the last 50). */
const recentCalls = new Map<string, number[]>();

function recordCall(queueName: string, ms: number): void {
  const list = recentCalls.get(queueName) ?? [];
  list.push(ms);
  if (list.length > 50) list.shift();
  recentCalls.set(queueName, list);
}

export async function handleAgentRequest(
  deps: AgentDependencies,
  queueName: string,
  body: unknown,
  context: InvocationContext,
): Promise<void> {
  const invoked = deps.clock.now().getTime();
  const baseLog = logger(context, { agent: queueName });
  letGateWake(deps, queueName, baseLog);
  if (isPullToken(body)) return onPullToken(deps, queueName, body, invoked, serveRequest, baseLog);
  const parsed = parseMessage(agentRequestSchema, body);
  if (!parsed.ok) return rejectPoison(deps.bus, queueName, context, parsed, body, deps.clock.now(), baseLog);
  const request = parsed.value;
  const fields = requestFields(request);
  annotate(fields);
  const log = baseLog.with(fields);
  const completeBy = new Date(request.completeBy);
  const deliveryCount = Number(context.triggerMetadata?.deliveryCount ?? 1);
  const margin = startMarginFor(
    recentCalls.get(queueName) ?? [],
    deps.stepTimeoutSeconds !== undefined ? deps.stepTimeoutSeconds * 1000 : undefined,
  );
  const service = deps.service ?? queueName;
  if (reportsNotStarted(deps.clock.now(), completeBy, deliveryCount, margin)) {
    annotate({ outcome: 'not-started' });
    log.warn('the request waited past the time it could start; reporting it not started', {
      completeBy: request.completeBy,
      marginMs: margin,
    });
    return reportNotStarted(deps, request);
  }
  if (deps.clock.now().getTime() >= completeBy.getTime()) {
    log.warn('complete-by passed before a redelivered request started; stopping silently');
    annotate({ outcome: 'silent' });
    return;
  }

  if (deps.budget) {
    const enqueued = context.triggerMetadata?.enqueuedTimeUtc;
    const since = request.waitingSince
      ? new Date(request.waitingSince)
      : enqueued instanceof Date || typeof enqueued === 'string'
        ? new Date(enqueued)
        : deps.clock.now();
    const admission = await deps.budget.admit({
      key: requestIdOf(request),
      orderId: request.orderId,
      customer: customerOf(request),
      waited: request.waits !== undefined,
      since: Number.isNaN(since.getTime()) ? deps.clock.now().getTime() : since.getTime(),
      completeBy: completeBy.getTime(),
    });
    if (admission.kind === 'wait') {
      // Every slot here busy: what they start next is read during their calls, from now (the send
      // below took 300 ms on the loaded emulator). The first pulls of a host otherwise opened their
      // links as its slots freed (staged bench: 0.7-1.3 s each, the first 2 s at half the limit).
      if (deps.budget.pulling && admission.reason === 'concurrency' && deps.bus.pull)
        readAheadOf(deps, queueName).start(maxReadAhead);
      const back = await sendBackToWait(
        { ...deps, pulling: deps.budget.pulling, wantsToken: (at) => deps.budget?.wantsToken(at) ?? true },
        queueName,
        request,
        admission.at,
        since,
        admission.startBy,
      );
      annotate({ outcome: 'waiting' });
      log.info('no call slot free at the service; the request waits in its queue', {
        service,
        reason: admission.reason,
        until: new Date(admission.at).toISOString(),
        completeBy: back.completeBy.toISOString(),
      });
      // A slot free here (the request went behind older ones): this invocation pulls the oldest.
      if (deps.budget.pulling && deps.budget.nextSlotAt() !== undefined)
        await pullTurn(deps, queueName, invoked, serveRequest, baseLog);
      return;
    }
  }

  // The slot this call used is free: it pulls the next waiting request (pull mode) as soon as the
  // call ended, while the reply goes out, as a pull loop does with what it pulled (staged bench:
  // a host's first calls freed their slots 300 ms late, after their replies, 380 requests waiting).
  let pulled: Promise<void> | undefined;
  const slotFreed = deps.budget?.pulling
    ? () => void (pulled ??= pullTurn(deps, queueName, invoked, serveRequest, baseLog))
    : undefined;
  try {
    await serveRequest(deps, queueName, request, completeBy, log, slotFreed);
  } finally {
    await pulled;
  }
}

/**
 * Calls the service for a request that holds a slot (read from the Agent's queue, or pulled from
 * the service's waiting queue), replies to the Scheduler and records the service's health.
 */
export async function serveRequest(
  deps: AgentDependencies,
  queueName: string,
  request: AgentRequestMessage,
  completeBy: Date,
  log: ReturnType<typeof logger>,
  /** Called once the call ended and its slot is free, before the reply is sent. */
  callEnded?: () => void,
): Promise<void> {
  const fields = requestFields(request);
  const service = deps.service ?? queueName;
  // Wall time: how long a call takes here, queueing for this process's CPU included.
  const started = Date.now();
  const result = await inSpan(
    `${service} ${request.action}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'http.request.method': 'POST',
        'url.full': `${deps.serviceUrl.replace(/\/+$/, '')}/${request.action}`,
        'peer.service': service,
        ...orderAttributes(fields),
      },
    },
    async (span) => {
      let offTheWire = () => {};
      const r = await callRemoteService(
        {
          baseUrl: deps.serviceUrl,
          operation: request.action,
          // A callback step: the service gets the URL (with its token) to POST the outcome to.
          body: request.callbackUntil
            ? {
                ...request.payload,
                callbackUrl: callbackUrlFor({ ...request, callbackUntil: request.callbackUntil }),
              }
            : request.payload,
          idempotencyKey: request.idempotencyKey,
          completeBy,
          reportBy: reportByFor(deps.clock.now(), completeBy),
          signal: deps.signal,
          onPushback: deps.budget
            ? (_status, retryAfterMs) => deps.budget?.pushback(retryAfterMs)
            : undefined,
          // The rate window counts the start from the send, then from the request's headers on
          // the socket, the nearest this side gets to the service's receipt.
          onAttempt: deps.budget
            ? (a) => {
                if (a.number !== 1) return;
                const key = requestIdOf(request);
                deps.budget?.sending(key);
                offTheWire = whenOnTheWire(request.idempotencyKey, () => deps.budget?.onTheWire(key));
              }
            : undefined,
        },
        deps.callPolicy,
        deps.clock,
      )
        .then((r) => {
          // An answer that is not a refusal is news that the service takes calls (pauseNews.ts).
          deps.budget?.answered(lastStatusOf(r));
          return r;
        })
        .finally(() => {
          offTheWire();
          deps.budget?.done(Date.now() - started);
          callEnded?.();
        });
      const status = lastStatusOf(r);
      span.setAttributes({
        'order.remote.attempts': r.attempts,
        'order.outcome': r.outcome,
        ...(status !== undefined ? { 'http.response.status_code': status } : {}),
      });
      return r;
    },
  );
  const verdict = verdictOf(deps.refusals, result);
  recordStepCall(request.step, result.outcome, Date.now() - started);
  if (verdict.kind === 'stalled') recordRemoteFailure(service, 'operational');
  else if (result.outcome === 'failed-permanently') recordRemoteFailure(service, 'refusal');
  annotate({ outcome: verdict.kind === 'answered' ? result.outcome : verdict.kind });
  // The reply first, and health bookkeeping (a shared table row) in the background: it must never
  // push a reply past complete-by nor hold the invocation's slot.
  try {
    await passOn(deps, request, result, verdict, completeBy, log);
    // A call cut off at complete-by says how long the service hung, not how long a call takes.
    if (verdict.kind !== 'silent') recordCall(queueName, Date.now() - started);
  } finally {
    void recordHealth(deps, service, verdict, log);
  }
}

/**
 * No call was made: the request sat in this Agent's queue behind others. The Supervisor retries the
 * step without spending the failure budget. Its own id: duplicates of the request are absorbed.
 */
async function reportNotStarted(deps: AgentDependencies, request: AgentRequestMessage): Promise<void> {
  const requestId = requestIdOf(request);
  const reply: AgentReplyMessage = {
    ...replyTo(request, 'not-started'),
    error: { message: `the request waited in the Agent's queue past its complete-by ${request.completeBy}` },
  };
  await deps.bus.send(queues.scheduler, [
    {
      messageId: notStartedReplyId(requestId),
      body: reply,
      subject: 'agent-reply',
      correlationId: request.orderId,
    },
  ]);
}

async function passOn(
  deps: AgentDependencies,
  request: AgentRequestMessage,
  result: RemoteCallResult,
  verdict: Verdict,
  completeBy: Date,
  log: ReturnType<typeof logger>,
): Promise<void> {
  if (verdict.kind === 'silent' || deps.clock.now().getTime() >= completeBy.getTime()) {
    log.warn('stopping silently: complete-by reached', {
      outcome: result.outcome,
      attempts: result.attempts,
      reason: result.outcome === 'deadline-passed' ? result.reason : 'answer arrived after complete-by',
    });
    return;
  }
  const requestId = requestIdOf(request);
  if (verdict.kind === 'stalled') {
    log.warn('remote service unavailable; reporting the step stalled (no compensation)', {
      attempts: result.attempts,
      status: verdict.status,
      error: verdict.detail,
    });
    const stalled: AgentReplyMessage = {
      ...replyTo(request, 'stalled'),
      error: {
        message: verdict.detail.slice(0, 2000),
        ...(verdict.status !== undefined ? { status: verdict.status } : {}),
      },
    };
    // Its own id: a redelivered request that then succeeds must still get its reply through.
    await deps.bus.send(queues.scheduler, [
      {
        messageId: `${requestId}:stalled`,
        body: stalled,
        subject: 'agent-reply',
        correlationId: request.orderId,
      },
    ]);
    return;
  }

  const reply = replyTo(request, result.outcome === 'succeeded' ? 'succeeded' : 'failed');
  if (result.outcome === 'succeeded' && request.callbackUntil && request.kind === 'do') {
    // The work is started, not done: the outcome comes by callback (any 2xx: a service that
    // finished already answers again by callback, under the same idempotency key).
    reply.outcome = 'accepted';
    const reference = referenceOf(result.body);
    if (reference) reply.reference = reference;
    log.info('remote service accepted the work; the step waits for its callback', {
      status: result.status,
      reference,
    });
  } else if (result.outcome === 'succeeded') {
    reply.result = result.body;
    log.info('remote call succeeded', { attempts: result.attempts, status: result.status });
  } else if (result.outcome === 'failed-permanently') {
    reply.error = { message: result.error.slice(0, 2000) };
    if (result.status !== undefined) reply.error.status = result.status;
    log.warn('remote service refused; replying with the refusal', {
      attempts: result.attempts,
      status: result.status,
      error: result.error,
    });
  }
  await deps.bus.send(queues.scheduler, [
    { messageId: `${requestId}:reply`, body: reply, subject: 'agent-reply', correlationId: request.orderId },
  ]);
}

/**
 * What the call means for the order: an answer (success or business refusal) to pass on, an
 * operational failure to report as a stall, or nothing to say (complete-by reached mid-call, the
 * host stopping): the Supervisor's timeout covers those.
 */
type Verdict =
  { kind: 'answered' } | { kind: 'stalled'; status?: number; detail: string } | { kind: 'silent' };

function verdictOf(refusals: RefusalDeclaration, result: RemoteCallResult): Verdict {
  switch (result.outcome) {
    case 'succeeded':
      return { kind: 'answered' };
    case 'failed-permanently':
      if (result.status !== undefined && meaningOf(refusals, result.status, result.body) === 'operational') {
        return { kind: 'stalled', status: result.status, detail: result.error };
      }
      return { kind: 'answered' };
    case 'deadline-passed': {
      const failure = {
        ...(result.lastStatus !== undefined ? { status: result.lastStatus } : {}),
        detail: result.lastError ?? 'no answer from the service',
      };
      if (result.reason === 'deadline' || result.reason === 'aborted') return { kind: 'silent' };
      return { kind: 'stalled', ...failure };
    }
  }
}

/**
 * When the Agent stops retrying to report a stall: a quarter of its window before complete-by
 * (at least 0.5 s, at most 10 s), so the reply is applied before the Supervisor looks.
 */
export function reportByFor(now: Date, completeBy: Date): Date {
  const window = completeBy.getTime() - now.getTime();
  const margin = Math.min(10_000, Math.max(500, window / 4));
  return new Date(completeBy.getTime() - margin);
}

async function recordHealth(
  deps: AgentDependencies,
  service: string,
  verdict: Verdict,
  log: ReturnType<typeof logger>,
): Promise<void> {
  if (!deps.outages) return;
  try {
    if (verdict.kind === 'answered') await deps.outages.answered(service);
    // A call cut off by our own complete-by says nothing about the service (the breaker agrees):
    // an Agent that started late behind a backlog must not raise an outage.
    else if (verdict.kind === 'stalled') {
      await deps.outages.failed(service, { status: verdict.status, detail: verdict.detail }, log);
    }
  } catch (e) {
    // Health bookkeeping must never hold up the order: the next call records again.
    log.warn('could not record the service health', { service, error: (e as Error).message });
  }
}
