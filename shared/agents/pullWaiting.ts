import { randomUUID } from 'node:crypto';
import { agentRequestSchema, parseMessage, type AgentRequestMessage } from '../messaging/contracts.js';
import type { PulledMessage } from '../messaging/bus.js';
import { waitingQueueOf } from '../messaging/entities.js';
import type { logger } from '../observability/logger.js';
import { inSpan, orderAttributes, SpanKind } from '../observability/tracing.js';
import type { AgentDependencies } from './agent.js';
import { maxTokenHops, pullTokenMessage, type PullToken } from './pullToken.js';
import { PullAhead } from './pullAhead.js';
import type { ServiceCallGate } from './callBudget.js';
import { extendCompleteBy } from './waitForSlot.js';
import { customerOf, requestFields, requestIdOf } from './requestOf.js';
import { traceCall } from './callTrace.js';

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

/**
 * How long one invocation keeps pulling: well inside the host's lock renewal (5 min) and the
 * function timeout (10 min). When it runs out the slot idles until a token reaches a free slot
 * (bench: 20 s left a slot idle 1-2 s every 20 s).
 */
export const pullForMs = 60_000;
/** How long a free slot waits for a waiting request to fall due before its invocation ends. */
export const idleWaitMs = 1_000;
/** A free slot whose rate allows its next start within this waits for it (pacing). */
const paceWithinMs = 1_000;
/** How often the last loop waiting for a rate window looks again (a renewal may open it sooner). */
const windowLookMs = 250;
/** How long a loop whose grant lapsed waits at a time for the renewal on the way. */
const renewalWaitMs = 2_000;
/** No read ahead this close to a loop's end: the request read would only go back to the queue. */
const readAheadStopMs = 2_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/**
 * After a call ended here: every free slot of this instance pulls until none is due. The pull
 * loops pass a baton: a loop that stops while requests may still wait (no slot, the rate, its
 * time) leaves a pull token behind, so some instance pulls on; only an empty queue ends the chain.
 */
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
  if (workers === 0) {
    if (gate.activeChains > 0) return;
    // No loop here to start what was read ahead (the grant lapsed): it goes back for others.
    await giveBack(gate);
    if (gate.mayHaveWaiting()) await passBaton(deps, queueName, log);
    return;
  }
  await Promise.all(Array.from({ length: workers }, () => pullLoop(deps, queueName, invoked, serve, log)));
}

/**
 * The instance's requests read ahead from the service's waiting queue (one per gate): whichever
 * loop claims a slot takes what was read for it.
 */
export function readAheadOf(deps: AgentDependencies, queueName: string): PullAhead {
  const gate = deps.budget!;
  return (gate.readAhead ??= new PullAhead(readWaiting(deps, queueName), gate.instance));
}

/** One read of the service's waiting queue: the next request due, waiting up to `idleWaitMs`. */
const readWaiting = (deps: AgentDependencies, queueName: string) => () =>
  deps.bus.pull!(waitingQueueOf(queueName), 1, idleWaitMs);

async function pullLoop(
  deps: AgentDependencies,
  queueName: string,
  invoked: number,
  serve: Serve,
  log: Log,
): Promise<void> {
  const gate = deps.budget!;
  gate.activeChains += 1;
  // A request's reply and its settlement run on while the slot, free once its call ended, pulls
  // the next: they took 30-100 ms of each slot's cycle (bench, 300 ms calls).
  const finishing = new Set<Promise<void>>();
  let why: Awaited<ReturnType<typeof pullWhile>>;
  let gaveBack = 0;
  try {
    why = await pullWhile(deps, queueName, invoked, serve, log, finishing);
  } finally {
    await Promise.all(finishing);
    gate.activeChains -= 1;
    // The instance's last loop gives back what no loop of it will start.
    if (gate.activeChains === 0) gaveBack = await giveBack(gate);
  }
  traceCall({ ev: 'pull-end', inst: gate.instance, t: deps.clock.now().getTime(), why });
  // A loop out of time leaves its slot free: the token is due at once, for whichever slot is free;
  // so do requests given back, even by a loop that found the queue empty.
  if ((why !== 'empty' || gaveBack > 0) && gate.activeChains === 0 && gate.mayHaveWaiting())
    await passBaton(deps, queueName, log, undefined, why === 'time' || gaveBack > 0);
}

/** Gives back what the instance read ahead: those requests wait in the queue again. */
async function giveBack(gate: ServiceCallGate): Promise<number> {
  const n = (await gate.readAhead?.giveBack()) ?? 0;
  if (n > 0) gate.cameBack();
  return n;
}

/** Pulls and serves waiting requests while a slot is free; says why it stopped. */
async function pullWhile(
  deps: AgentDependencies,
  queueName: string,
  invoked: number,
  serve: Serve,
  log: Log,
  finishing: Set<Promise<void>>,
): Promise<'empty' | 'no-slot' | 'rate' | 'time' | 'error'> {
  const gate = deps.budget!;
  const now = () => deps.clock.now().getTime();
  const read = readWaiting(deps, queueName);
  const ahead = readAheadOf(deps, queueName);
  let current: Promise<void> | undefined;
  while (now() - invoked < pullForMs) {
    const at = gate.nextSlotAt();
    if (at === undefined) {
      // Woken by another call's end whose slot someone else took: wait for this loop's own call.
      if (current && finishing.has(current)) {
        await current;
        continue;
      }
      // The grant lapsed with its renewal on the way (a slow table): go on when it lands.
      if (await gate.renewalOnTheWay(renewalWaitMs)) continue;
      return 'no-slot';
    }
    if (at > now()) {
      if (at - now() > paceWithinMs) {
        // One loop of the instance waits for the window however long it is (a low rate's window
        // is over a second: 1/s is 1 s plus the margin), looking again as the grant changes.
        // Had every loop ended, the last one's baton could reach an instance already pulling and
        // be dropped there: a grant that grew later pulled nothing (staged bench: 4/s and 2
        // slots idle for 10 s). Not through a service's pause (a Retry-After): the loop ends and
        // its token falls due later, as before.
        if (gate.windowWaiter || gate.paused || !gate.mayHaveWaiting()) return 'rate';
        gate.windowWaiter = true;
        try {
          await sleep(Math.min(at - now(), windowLookMs, pullForMs - (now() - invoked)));
        } finally {
          gate.windowWaiter = false;
        }
        continue;
      }
      // Requests are read while the window is closed, one for each free slot, so the slots start
      // them when it opens (it frees several starts within a few ms).
      if (gate.mayHaveWaiting() && now() - invoked < pullForMs - readAheadStopMs)
        ahead.start(gate.freeSlots());
      await sleep(at - now());
      continue;
    }
    const claimed = gate.claim();
    if (claimed === undefined) continue;
    let got: PulledMessage[];
    try {
      const early = await ahead.take();
      got = early && early.length > 0 ? early : await read();
    } catch (e) {
      gate.pulled(claimed, undefined);
      log.warn('could not read the waiting queue', { error: (e as Error).message });
      return 'error';
    }
    // The read ahead may hold what this read waited for: a request sent to wait meanwhile, read by
    // the read ahead its sender started.
    if (got.length === 0) got = (await ahead.take().catch(() => undefined)) ?? got;
    traceCall({ ev: 'pull', inst: gate.instance, t: now(), got: got.length, ms: now() - claimed });
    if (got.length === 0) {
      gate.pulled(claimed, undefined);
      gate.foundEmpty();
      return 'empty';
    }
    gate.tookWaiting();
    const served = servePulled(deps, queueName, got[0], claimed, serve, log);
    finishing.add(served);
    current = served;
    void served.finally(() => finishing.delete(served));
    // Another slot free (granted, or given back, after this loop began): pull for it too, rather
    // than leave it idle until a call ends.
    if (gate.freeSlots() > 0) continue;
    // Every slot busy: the next request is read during the calls, for the slot that frees first.
    if (gate.mayHaveWaiting() && now() - invoked < pullForMs - readAheadStopMs) ahead.start();
    await Promise.race([served, gate.slotFreed()]);
  }
  return 'time';
}

/** Leaves a pull token for whichever instance can pull next (soon, most likely elsewhere). */
async function passBaton(
  deps: AgentDependencies,
  queueName: string,
  log: Log,
  token?: PullToken,
  dueNow = false,
  forInstance?: string,
): Promise<void> {
  const gate = deps.budget!;
  const now = deps.clock.now().getTime();
  const at = dueNow ? now : now + gate.passOnMs();
  const message = token
    ? pullTokenMessage(token.id, at, now, token.hops + 1, token.for)
    : pullTokenMessage(`pull-baton:${randomUUID()}`, at, now, 0, forInstance);
  await deps.bus
    .send(queueName, [message])
    .catch((e: unknown) => log.warn('could not pass the pull token on', { error: (e as Error).message }));
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
  const since = Date.parse(request.waitingSince ?? '');
  if (Number.isFinite(since)) gate.waitedFor(now.getTime() - since);
  let completeBy = new Date(request.completeBy);
  const fields = requestFields(request);
  const requestLog = log.with(fields);
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
    const id = `${requestIdOf(request)}:waiting:${request.waits ?? 0}:start`;
    await extendCompleteBy(deps.bus, request, completeBy, id);
  }
  // A host that heard nothing of the service lately (1 s by default) reads the lease row first (pauseNews.ts).
  await gate.pauseKnown();
  if (gate.paused) {
    // The service pushed back since this slot was claimed (a 429 here or, by the lease row,
    // elsewhere): no call in the pause. Back to the waiting queue, where it is the oldest again.
    // Bench: a call 1,058 ms after the first 429, claimed before it and sent 750 ms later.
    gate.pulled(claimed, undefined);
    await m.abandon();
    return;
  }
  gate.pulled(claimed, {
    key: requestIdOf(request),
    orderId: request.orderId,
    customer: customerOf(request),
    waited: true,
    since: Number.isFinite(since) ? since : now.getTime(),
    completeBy: completeBy.getTime(),
  });
  try {
    await inSpan(
      `pulled ${deps.service ?? queueName} request`,
      { kind: SpanKind.CONSUMER, attributes: orderAttributes(fields) },
      () =>
        serve(deps, queueName, { ...request, completeBy: completeBy.toISOString() }, completeBy, requestLog),
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
 * A pull token arrived. With a free slot (now or within a moment) this invocation pulls. Where a
 * pull loop runs it is dropped (that loop passes its own baton on when it stops). Otherwise it is
 * passed on, a little later and most likely to another instance, while requests may still wait.
 * (Passing it on where a loop runs instead kept a slot freed elsewhere from idling, but took 3-4
 * times the token messages in the bench for 0-2 points of throughput.)
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
  const elsewhere = token.for !== undefined && token.for !== gate.instance;
  const action =
    gate.nextSlotAt() !== undefined
      ? 'pull'
      : token.hops >= maxTokenHops
        ? 'drop'
        : elsewhere
          ? 'pass'
          : gate.activeChains > 0 || !gate.mayHaveWaiting()
            ? 'drop'
            : 'pass';
  traceCall({ ev: 'token', inst: gate.instance, t: deps.clock.now().getTime(), action, hops: token.hops });
  if (action === 'pull') return pullTurn(deps, queueName, invoked, serve, log);
  // One looking for its instance goes on at once: the slot it is for idles meanwhile.
  if (action === 'pass') await passBaton(deps, queueName, log, token, elsewhere);
}

/**
 * Lets the instance's gate wake it: granted a slot while none of its loops runs and requests may
 * wait, it leaves a token addressed to itself (set by any invocation of the Agent here).
 */
export function letGateWake(deps: AgentDependencies, queueName: string, log: Log): void {
  const gate = deps.budget;
  if (!gate?.pulling || !deps.bus.pull || gate.wake) return;
  gate.wake = () =>
    void passBaton(deps, queueName, log, undefined, true, gate.instance).catch(() => undefined);
}
