import { dispatchMessageId, requestTimeToLiveMs, type Clock } from '../domain/index.js';
import { replyTo, type AgentReplyMessage, type AgentRequestMessage } from '../messaging/contracts.js';
import type { MessageBus } from '../messaging/bus.js';
import { queues } from '../messaging/entities.js';

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
}

export async function sendBackToWait(
  deps: WaitDependencies,
  queueName: string,
  request: AgentRequestMessage,
  at: number,
  waitingSince: Date,
): Promise<{ completeBy: Date; extended: boolean }> {
  const now = deps.clock.now();
  const requestId = dispatchMessageId(
    request.orderId,
    request.step,
    request.attempt,
    request.kind,
    request.run,
  );
  const waits = (request.waits ?? 0) + 1;
  const windowMs = (deps.stepTimeoutSeconds ?? 30) * 1000;
  const old = new Date(request.completeBy);
  const completeBy = at + windowMs / 2 > old.getTime() ? new Date(at + windowMs) : old;
  const extended = completeBy.getTime() > old.getTime();
  if (extended) {
    const reply: AgentReplyMessage = {
      ...replyTo(request, 'waiting'),
      completeBy: completeBy.toISOString(),
    };
    // Before the request goes back: the Supervisor must not time the step out while it waits.
    await deps.bus.send(queues.scheduler, [
      {
        messageId: `${requestId}:waiting:${waits}`,
        body: reply,
        subject: 'agent-reply',
        correlationId: request.orderId,
      },
    ]);
  }
  const body: AgentRequestMessage = {
    ...request,
    completeBy: completeBy.toISOString(),
    waits,
    waitingSince: waitingSince.toISOString(),
  };
  await deps.bus.send(queueName, [
    {
      messageId: `${requestId}:wait:${waits}`,
      body,
      subject: `${request.step}:${request.kind}`,
      correlationId: request.orderId,
      timeToLiveMs: requestTimeToLiveMs(now, completeBy),
      ...(at > now.getTime() ? { scheduledEnqueueTime: new Date(at) } : {}),
    },
  ]);
  return { completeBy, extended };
}
