import type { InvocationContext } from '@azure/functions';
import { dispatchMessageId, type Clock } from '../domain/index.js';
import { agentRequestSchema, parseMessage, type AgentReplyMessage } from '../messaging/contracts.js';
import { queues } from '../messaging/entities.js';
import type { MessageBus } from '../messaging/bus.js';
import { rejectPoison } from '../messaging/poison.js';
import { logger } from '../observability/logger.js';
import { callRemoteService, type RemoteCallPolicyOptions } from './remoteServiceClient.js';

/**
 * An Agent: wraps one remote service. It performs (or undoes) one step before the step's
 * complete-by and answers the Scheduler. After complete-by it stops and sends nothing, not even
 * an error: the Supervisor owns what happens next. Agents never touch the state store.
 */
export interface AgentDependencies {
  bus: MessageBus;
  clock: Clock;
  /** Base URL of the remote service this Agent wraps. */
  serviceUrl: string;
  callPolicy?: Partial<RemoteCallPolicyOptions>;
  /** Fires when the host shuts down: the call stops like at the deadline. */
  signal?: AbortSignal;
}

export async function handleAgentRequest(
  deps: AgentDependencies,
  queueName: string,
  body: unknown,
  context: InvocationContext,
): Promise<void> {
  const baseLog = logger(context, { agent: queueName });
  const parsed = parseMessage(agentRequestSchema, body);
  if (!parsed.ok) return rejectPoison(deps.bus, queueName, context, parsed, deps.clock.now(), baseLog);
  const request = parsed.value;
  const log = baseLog.with({
    orderId: request.orderId,
    step: request.step,
    attempt: request.attempt,
    kind: request.kind,
    run: request.run,
  });
  const completeBy = new Date(request.completeBy);
  if (deps.clock.now().getTime() >= completeBy.getTime()) {
    log.warn('complete-by passed before the agent started; stopping silently');
    return;
  }

  const result = await callRemoteService(
    {
      baseUrl: deps.serviceUrl,
      operation: request.action,
      body: request.payload,
      idempotencyKey: request.idempotencyKey,
      completeBy,
      signal: deps.signal,
    },
    deps.callPolicy,
    deps.clock,
  );

  if (result.outcome === 'deadline-passed' || deps.clock.now().getTime() >= completeBy.getTime()) {
    log.warn('stopping silently: complete-by reached', {
      outcome: result.outcome,
      attempts: result.attempts,
      reason: result.outcome === 'deadline-passed' ? result.reason : 'answer arrived after complete-by',
    });
    return;
  }

  const reply: AgentReplyMessage = {
    type: 'agent-reply',
    orderId: request.orderId,
    run: request.run,
    step: request.step,
    kind: request.kind,
    attempt: request.attempt,
    outcome: result.outcome === 'succeeded' ? 'succeeded' : 'failed',
  };
  if (result.outcome === 'succeeded') {
    reply.result = result.body;
    log.info('remote call succeeded', { attempts: result.attempts, status: result.status });
  } else {
    reply.error = { message: result.error.slice(0, 2000) };
    if (result.status !== undefined) reply.error.status = result.status;
    log.warn('remote call failed permanently; replying with the error', {
      attempts: result.attempts,
      status: result.status,
      error: result.error,
    });
  }
  const requestId = dispatchMessageId(
    request.orderId,
    request.step,
    request.attempt,
    request.kind,
    request.run,
  );
  await deps.bus.send(queues.scheduler, [
    { messageId: `${requestId}:reply`, body: reply, subject: 'agent-reply', correlationId: request.orderId },
  ]);
}
