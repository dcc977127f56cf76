import type { InvocationContext } from '@azure/functions';
import type { MessageBus } from './bus.js';
import { poisonAlert } from './commandMessages.js';
import type { Logger } from '../observability/logger.js';

/**
 * Thrown for a message whose body fails its schema. The host abandons the message and the broker
 * dead-letters it after MaxDeliveryCount; before that, the order it names has been put in front
 * of an operator (see docs/architecture.md, "Poison messages").
 */
export class PoisonMessageError extends Error {
  constructor(
    public readonly entity: string,
    public readonly reason: string,
  ) {
    super(`poison message on ${entity}: ${reason}`);
    this.name = 'PoisonMessageError';
  }
}

export async function rejectPoison(
  bus: MessageBus,
  entity: string,
  context: InvocationContext,
  failure: { reason: string; orderId?: string },
  now: Date,
  log: Logger,
): Promise<never> {
  const messageId = context.triggerMetadata?.messageId;
  const id = typeof messageId === 'string' ? messageId : undefined;
  log.error('poison message: alerting an operator; it will be dead-lettered', {
    orderId: failure.orderId,
    entity,
    messageId: id,
    reason: failure.reason,
  });
  const { entity: alertQueue, message } = poisonAlert(entity, id, failure.reason, failure.orderId, now);
  await bus.send(alertQueue, [message]);
  throw new PoisonMessageError(entity, failure.reason);
}
