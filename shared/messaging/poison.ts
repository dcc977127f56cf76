import type { InvocationContext } from '@azure/functions';
import type { MessageBus } from './bus.js';
import { poisonAlert } from './commandMessages.js';
import type { Logger } from '../observability/logger.js';

/**
 * Thrown for a message whose body fails its schema when it could not be quarantined. The host
 * abandons the message and the broker dead-letters it after MaxDeliveryCount; before that, the
 * order it names has been put in front of an operator (see docs/architecture.md, "Poison messages").
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

/**
 * A message whose body fails its contract: alert an operator (once: the alert's id is fixed), then
 * quarantine it, dead-lettered at once with the reason (quarantine.ts), and return so the host
 * completes the original. If the quarantine fails, throw: the broker dead-letters it later.
 */
export async function rejectPoison(
  bus: MessageBus,
  entity: string,
  context: InvocationContext,
  failure: { reason: string; orderId?: string },
  body: unknown,
  now: Date,
  log: Logger,
): Promise<void> {
  const metadata = context.triggerMetadata ?? {};
  const id = typeof metadata.messageId === 'string' ? metadata.messageId : undefined;
  const fields = { orderId: failure.orderId, entity, messageId: id, reason: failure.reason };
  log.error('poison message: alerting an operator and dead-lettering it', fields);
  const { entity: alertQueue, message } = poisonAlert(entity, id, failure.reason, failure.orderId, now);
  await bus.send(alertQueue, [message]);
  if (bus.quarantine) {
    try {
      await bus.quarantine(
        {
          entity,
          ...(id === undefined ? {} : { messageId: id }),
          ...(typeof metadata.correlationId === 'string' ? { correlationId: metadata.correlationId } : {}),
          ...(typeof metadata.deliveryCount === 'number' ? { deliveryCount: metadata.deliveryCount } : {}),
        },
        body,
        failure.reason,
      );
      return;
    } catch (e) {
      log.error('poison quarantine failed: the broker will dead-letter it after MaxDeliveryCount', {
        ...fields,
        error: (e as Error).message,
      });
    }
  }
  throw new PoisonMessageError(entity, failure.reason);
}
