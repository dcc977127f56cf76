import type { Command, Order } from '../domain/index.js';
import { requestTimeToLiveMs } from '../domain/unreadRequests.js';
import { defaultStatusEventLevel, publishedAt, type StatusEventLevel } from '../domain/statusEvents.js';
import type {
  AgentRequestMessage,
  OperatorAlert,
  OrderStatusEvent,
  ProcessOrderMessage,
} from './contracts.js';
import { queues, topics } from './entities.js';
import type { MessageBus, OutgoingMessage } from './bus.js';
import type { Logger } from '../observability/logger.js';

/**
 * Turns the domain's commands into Service Bus messages. Pure except for `carryOut`, which sends
 * them: grouped by entity, one send per entity, all entities in parallel.
 */
export interface Addressed {
  entity: string;
  message: OutgoingMessage;
}

/** What an Agent needs to call its remote service: the order, and for an undo the key it undoes. */
function payloadFor(order: Order, originalIdempotencyKey?: string): Record<string, unknown> {
  const payload: Record<string, unknown> = {
    orderId: order.orderId,
    customerId: order.customerId,
    items: order.items,
    shippingAddress: order.shippingAddress,
  };
  if (originalIdempotencyKey !== undefined) payload.originalIdempotencyKey = originalIdempotencyKey;
  return payload;
}

export function toMessage(command: Command, order: Order, now: Date): Addressed {
  switch (command.type) {
    case 'DispatchStep': {
      const body: AgentRequestMessage = {
        type: 'agent-request',
        orderId: command.orderId,
        run: command.run,
        step: command.step,
        kind: command.kind,
        action: command.action,
        attempt: command.attempt,
        completeBy: command.completeBy.toISOString(),
        idempotencyKey: command.idempotencyKey,
        payload: payloadFor(order, command.kind === 'compensate' ? command.actionIdempotencyKey : undefined),
        ...(command.callbackUntil ? { callbackUntil: command.callbackUntil.toISOString() } : {}),
      };
      const message: OutgoingMessage = {
        messageId: command.messageId,
        body,
        subject: `${command.step}:${command.kind}`,
        correlationId: command.orderId,
        // Kept past its complete-by so a busy Agent still reads it and answers "not started".
        timeToLiveMs: requestTimeToLiveMs(now, command.completeBy),
      };
      if (command.delaySeconds > 0)
        message.scheduledEnqueueTime = new Date(now.getTime() + command.delaySeconds * 1000);
      return { entity: command.agentQueue, message };
    }
    case 'NotifyScheduler': {
      const body: ProcessOrderMessage = {
        type: 'process-order',
        orderId: command.orderId,
        reason: command.reason,
      };
      const message: OutgoingMessage = {
        messageId: command.messageId,
        body,
        subject: 'process-order',
        correlationId: command.orderId,
      };
      if (command.delaySeconds > 0)
        message.scheduledEnqueueTime = new Date(now.getTime() + command.delaySeconds * 1000);
      return { entity: queues.scheduler, message };
    }
    case 'PublishStatus': {
      const body: OrderStatusEvent = {
        type: 'order-status',
        orderId: command.orderId,
        event: command.event,
        processState: command.processState,
        at: command.at.toISOString(),
      };
      if (command.step !== undefined) body.step = command.step;
      if (command.detail !== undefined) body.detail = command.detail.slice(0, 2000);
      return {
        entity: topics.orderStatus,
        message: {
          messageId: command.messageId,
          body,
          subject: command.event,
          correlationId: command.orderId,
          applicationProperties: { orderId: command.orderId, event: command.event },
        },
      };
    }
    case 'RaiseOperatorAlert': {
      const body: OperatorAlert = {
        type: 'operator-alert',
        orderId: command.orderId,
        reason: `${command.code}: ${command.reason}`.slice(0, 2000),
        processState: command.processState,
        failureCount: command.failureCount,
        at: command.at.toISOString(),
      };
      return {
        entity: queues.operatorAlerts,
        message: {
          messageId: command.messageId,
          body,
          subject: command.code,
          correlationId: command.orderId,
        },
      };
    }
  }
}

/** Where commands go: the bus, and which status events this deployment publishes. */
export interface Outbox {
  bus: MessageBus;
  statusEvents?: StatusEventLevel;
}

/** Sends the commands' messages. Safe to repeat: the message ids are deterministic. */
export async function carryOut(
  outbox: Outbox,
  commands: readonly Command[],
  order: Order,
  now: Date,
  log?: Logger,
): Promise<void> {
  const byEntity = new Map<string, OutgoingMessage[]>();
  for (const command of publishedAt(commands, outbox.statusEvents ?? defaultStatusEventLevel)) {
    const { entity, message } = toMessage(command, order, now);
    if (command.type === 'RaiseOperatorAlert') {
      // The error log is the alert's second channel: Application Insights sees it even if the
      // operator-alerts queue is not watched.
      log?.error('operator alert', { orderId: command.orderId, code: command.code, reason: command.reason });
    }
    const list = byEntity.get(entity) ?? [];
    list.push(message);
    byEntity.set(entity, list);
  }
  await Promise.all([...byEntity].map(([entity, messages]) => outbox.bus.send(entity, messages)));
}

/** An alert for a message that failed its schema, naming the order when it is readable. */
export function poisonAlert(
  entity: string,
  messageId: string | undefined,
  reason: string,
  orderId: string | undefined,
  now: Date,
): Addressed {
  const body: OperatorAlert = {
    type: 'operator-alert',
    orderId: orderId ?? 'unknown',
    reason: `PoisonMessage on ${entity} (MessageId ${messageId ?? 'none'}): ${reason}`.slice(0, 2000),
    at: now.toISOString(),
  };
  return {
    entity: queues.operatorAlerts,
    message: {
      messageId: `poison:${entity}:${messageId ?? reason.slice(0, 60)}`.slice(0, 128),
      body,
      subject: 'PoisonMessage',
      correlationId: orderId,
    },
  };
}
