import { requestTimeToLiveMs, type Clock } from '../domain/index.js';
import { requestIdOf } from './requestOf.js';
import { replyTo, type AgentReplyMessage, type AgentRequestMessage } from '../messaging/contracts.js';
import type { MessageBus } from '../messaging/bus.js';
import { queues, waitingQueueOf } from '../messaging/entities.js';
import { pullTokenMessage } from './pullToken.js';

/**
 * A request that cannot get a call slot now goes back to its Agent's queue, scheduled for the slot
 * booked for it (issue 26): no function, lock or failure budget is held while it waits. When the
 * wait would leave it less than half its window, the step's complete-by moves out by the wait
 * first (a `waiting` reply the Scheduler applies), and the re-sent request carries the new one.
 * Ids follow from the request and its wait count, so a redelivery re-sends nothing new.
 */
export interface WaitDependencies {
  bus: MessageBus;
  clock: Clock;
  /** The step's window (its complete-by from dispatch). */
  stepTimeoutSeconds?: number;
  /**
   * The request waits in the service's waiting queue, pulled by a freed slot (the gate is in pull
   * mode), instead of coming back to its own queue at its slot.
   */
  pulling?: boolean;
  /** Pull mode: whether this wait sends a pull token too (the gate keeps them few). */
  wantsToken?: (at: number) => boolean;
}

/** A request due within this goes to the waiting queue at once. */
const dueAtOnceMs = 50;

export async function sendBackToWait(
  deps: WaitDependencies,
  queueName: string,
  request: AgentRequestMessage,
  at: number,
  waitingSince: Date,
  /** Pull mode: when it is expected to start, behind the requests waiting before it. */
  startBy: number = at,
): Promise<{ completeBy: Date; extended: boolean }> {
  const now = deps.clock.now();
  const requestId = requestIdOf(request);
  const waits = (request.waits ?? 0) + 1;
  const windowMs = (deps.stepTimeoutSeconds ?? 30) * 1000;
  const old = new Date(request.completeBy);
  // Pulled: it starts when the requests ahead of it have (startBy: the lease row's count of
  // waiting requests, or how long those pulled lately waited); half the wait again covers an
  // estimate a lease period old, and at least two windows cover the first seconds of a burst,
  // before any instance has reported its count (bench: 27 of 116 first waits timed out).
  const slack = deps.pulling ? Math.max(0, startBy - now.getTime()) / 2 : 0;
  const from = Math.max(at, startBy, deps.pulling ? now.getTime() + 2 * windowMs : 0);
  const completeBy = from + windowMs / 2 + slack > old.getTime() ? new Date(from + windowMs + slack) : old;
  const extended = completeBy.getTime() > old.getTime();
  if (extended) {
    // Before the request goes back: the Supervisor must not time the step out while it waits.
    await extendCompleteBy(deps.bus, request, completeBy, `${requestId}:waiting:${waits}`);
  }
  const body: AgentRequestMessage = {
    ...request,
    completeBy: completeBy.toISOString(),
    waits,
    waitingSince: waitingSince.toISOString(),
  };
  const waiting = {
    messageId: `${requestId}:wait:${waits}`,
    body,
    subject: `${request.step}:${request.kind}`,
    correlationId: request.orderId,
    timeToLiveMs: requestTimeToLiveMs(now, completeBy),
    ...(at > now.getTime() ? { scheduledEnqueueTime: new Date(at) } : {}),
  };
  // Due later (a customer past its share): back to its own queue until then, and into the waiting
  // queue only when due. Queues deliver by sequence number, given at the send: a request scheduled
  // into the waiting queue would, once due, go before every request sent there meanwhile, and one
  // customer's later requests took the others' places (bench: others waited 10.6 s for payment
  // behind a burst, 1.2 s alone).
  if (!deps.pulling || at > now.getTime() + dueAtOnceMs) {
    await deps.bus.send(queueName, [waiting]);
    return { completeBy, extended };
  }
  await deps.bus.send(waitingQueueOf(queueName), [waiting]);
  // A token in the Agent's own queue, due with the request: whichever instance reads it pulls if
  // it has a free slot, so a request never waits for a slot that is free but has no invocation.
  if (deps.wantsToken?.(at) ?? true)
    await deps.bus.send(queueName, [pullTokenMessage(`${requestId}:pull:${waits}`, at, now.getTime(), 0)]);
  return { completeBy, extended };
}

/**
 * The `waiting` reply: the Scheduler moves the step's complete-by out to `completeBy` (never in).
 * Sent before the request waits longer, or before a pulled request starts close to its complete-by.
 */
export async function extendCompleteBy(
  bus: MessageBus,
  request: AgentRequestMessage,
  completeBy: Date,
  messageId: string,
): Promise<void> {
  const reply: AgentReplyMessage = {
    ...replyTo(request, 'waiting'),
    completeBy: completeBy.toISOString(),
  };
  await bus.send(queues.scheduler, [
    { messageId, body: reply, subject: 'agent-reply', correlationId: request.orderId },
  ]);
}
