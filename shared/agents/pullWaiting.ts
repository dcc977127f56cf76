import { randomUUID } from 'node:crypto';
import { dispatchMessageId } from '../domain/index.js';
import { agentRequestSchema, parseMessage, type AgentRequestMessage } from '../messaging/contracts.js';
import type { PulledMessage } from '../messaging/bus.js';
import { waitingQueueOf } from '../messaging/entities.js';
import type { logger } from '../observability/logger.js';
import { inSpan, orderAttributes, SpanKind } from '../observability/tracing.js';
import type { AgentDependencies } from './agent.js';
import { maxTokenHops, pullTokenMessage, type PullToken } from './pullToken.js';
import { extendCompleteBy } from './waitForSlot.js';

/**
 * The slot pulls its next request (issue 26). A request that cannot get a call slot waits in the
 * service's waiting queue (no trigger listens there; nothing is held while it waits). Whenever a
 * slot here is free, an invocation of the Agent that is running anyway (its own call just ended,
 * or it read a pull token) receives the next request that fell due from that queue and calls the
 * service for it, then the next, as long as the slot and the rate allow and for at most `pullForMs`
 * per invocation. Random redelivery no longer decides which instance a waiting request reaches: the
 * one with the free slot takes it.
 */
type Log = ReturnType<typeof logger>;
export type Serve = (
  deps: AgentDependencies,
  queueName: string,
  request: AgentRequestMessage,
  completeBy: Date,
  log: Log,
) => Promise<void>;

/** How long one invocation keeps pulling (well inside a message lock and a function timeout). */
export const pullForMs = 20_000;
/** How long a free slot waits for a waiting request to fall due before its invocation ends. */
export const idleWaitMs = 1_000;
/** A free slot whose rate allows its next start within this waits for it (pacing). */
const paceWithinMs = 1_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** After a call ended here: every free slot of this instance pulls until none is due. */
export async function pullTurn(
  deps: AgentDependencies,
  queueName: string,
  invoked: number,
  serve: Serve,
  log: Log,
): Promise<void> {
  const gate = deps.budget;
  if (!gate?.pulling || !deps.bus.pull) return;
  const workers = Math.max(gate.freeSlots(), gate.nextSlotAt() !== undefined ? 1 : 0);
  await Promise.all(
    Array.from({ length: workers }, () => pullLoop(deps, queueName, invoked, serve, log)),
  );
}

async function pullLoop(
  deps: AgentDependencies,
  queueName: string,
  invoked: number,
  serve: Serve,
  log: Log,
): Promise<void> {
  const gate = deps.budget!;
  const now = () => deps.clock.now().getTime();
  let handedOn = false;
  while (now() - invoked < pullForMs) {
    const at = gate.nextSlotAt();
    if (at === undefined) return;
    if (at > now()) {
      if (at - now() > paceWithinMs) return;
      await sleep(at - now());
      continue;
    }
    const claimed = gate.claim();
    if (claimed === undefined) continue;
    let got: PulledMessage[];
    try {
      got = await deps.bus.pull!(waitingQueueOf(queueName), 1, idleWaitMs);
    } catch (e) {
      gate.pulled(claimed, undefined);
      log.warn('could not read the waiting queue', { error: (e as Error).message });
      return;
    }
    if (got.length === 0) {
      gate.pulled(claimed, undefined);
      return;
    }
    handedOn = true;
    await servePulled(deps, queueName, got[0], claimed, serve, log);
  }
  // Out of time with requests still coming: another invocation takes over at once.
  if (handedOn)
    await deps.bus
      .send(queueName, [pullTokenMessage(`pull-handoff:${randomUUID()}`, now(), now(), 0)])
      .catch((e: unknown) => log.warn('could not hand the pull on', { error: (e as Error).message }));
}

async function servePulled(
  deps: AgentDependencies,
  queueName: string,
  m: PulledMessage,
  claimed: number,
  serve: Serve,
  log: Log,
): Promise<void> {
  const gate = deps.budget!;
  const parsed = parseMessage(agentRequestSchema, m.body);
  if (!parsed.ok) {
    gate.pulled(claimed, undefined);
    await m.deadLetter('PoisonMessage', parsed.reason);
    return;
  }
  const request = parsed.value;
  const now = deps.clock.now();
  let completeBy = new Date(request.completeBy);
  const requestLog = log.with({ orderId: request.orderId, step: request.step, attempt: request.attempt });
  if (now.getTime() >= completeBy.getTime()) {
    // The Supervisor's timeout owns it now (and may have retried the step already).
    gate.pulled(claimed, undefined);
    requestLog.warn('a waiting request fell due after its complete-by; dropped without a call', {
      completeBy: request.completeBy,
    });
    await m.complete();
    return;
  }
  const windowMs = (deps.stepTimeoutSeconds ?? 30) * 1000;
  if (completeBy.getTime() - now.getTime() < windowMs / 2) {
    // It waited longer than booked: a full window from its start, before it starts.
    completeBy = new Date(now.getTime() + windowMs);
    const requestId = dispatchMessageId(
      request.orderId,
      request.step,
      request.attempt,
      request.kind,
      request.run,
    );
    await extendCompleteBy(deps.bus, request, completeBy, `${requestId}:waiting:${request.waits ?? 0}:start`);
  }
  gate.pulled(claimed, {
    key: dispatchMessageId(request.orderId, request.step, request.attempt, request.kind, request.run),
    orderId: request.orderId,
    customer: typeof request.payload.customerId === 'string' ? request.payload.customerId : '',
    waited: true,
    since: Date.parse(request.waitingSince ?? '') || now.getTime(),
    completeBy: completeBy.getTime(),
  });
  const fields = {
    orderId: request.orderId,
    step: request.step,
    attempt: request.attempt,
    kind: request.kind,
    run: request.run,
  };
  try {
    await inSpan(
      `pulled ${deps.service ?? queueName} request`,
      { kind: SpanKind.CONSUMER, attributes: orderAttributes(fields) },
      () => serve(deps, queueName, { ...request, completeBy: completeBy.toISOString() }, completeBy, requestLog),
    );
    await m.complete();
  } catch (e) {
    // Read again by the next free slot: the call's idempotency key makes a repeat harmless.
    requestLog.warn('a pulled request failed; it goes back to the waiting queue', {
      error: (e as Error).message,
    });
    await m.abandon().catch(() => undefined);
  }
}

/**
 * A pull token arrived. With a free slot (now or within a moment) this invocation pulls. With
 * every slot busy it is dropped: the calls in flight pull when they end. Without a slot it passes
 * on (a little later, most likely to another instance) a few times, then is dropped.
 */
export async function onPullToken(
  deps: AgentDependencies,
  queueName: string,
  token: PullToken,
  invoked: number,
  serve: Serve,
  log: Log,
): Promise<void> {
  const gate = deps.budget;
  if (!gate?.pulling || !deps.bus.pull) return;
  await gate.refresh();
  if (gate.nextSlotAt() !== undefined) return pullTurn(deps, queueName, invoked, serve, log);
  if (gate.holdsSlot() || token.hops >= maxTokenHops) return;
  const now = deps.clock.now().getTime();
  await deps.bus.send(queueName, [pullTokenMessage(token.id, now + gate.passOnMs(), now, token.hops + 1)]);
}
