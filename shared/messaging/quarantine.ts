import { createHash } from 'node:crypto';
import type { ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage } from '@azure/service-bus';
import { queues } from './entities.js';

/**
 * The poison quarantine: a message whose body fails its contract is dead-lettered on its FIRST
 * delivery, with the reason, instead of being abandoned until the broker gives up after
 * MaxDeliveryCount. The Node.js programming model cannot settle its own trigger message (only the
 * preview @azure/functions-extensions-servicebus can, over the host's gRPC settlement channel), so
 * the handler sends a copy to the `poison` queue, dead-letters that copy itself through the SDK,
 * and then returns normally, so the host completes the original. Operators read, redrive (to the
 * entity the message came from) or discard it on the dead-letter screen like any other.
 *
 * Crash-safe in every order: before the copy is sent, the original is redelivered and quarantined
 * again; between the send and the dead-lettering, the copy waits in `poison` and the next
 * quarantine (any instance) dead-letters it; a redelivered original's copy has the same message id,
 * absorbed by duplicate detection. If the quarantine itself fails, the caller falls back to
 * throwing, and the broker dead-letters the original after MaxDeliveryCount as before.
 */

/** Application properties a quarantined copy carries (the console shows them; redrive reads one). */
export const poisonProperties = {
  /** The queue the message arrived on, where a redrive sends it back. */
  entity: 'poisonEntity',
  messageId: 'poisonMessageId',
  reason: 'poisonReason',
  /** The delivery on which it was quarantined (1: never retried). */
  deliveryCount: 'poisonDeliveryCount',
} as const;

/** The dead-letter reason Service Bus shows for a quarantined message. */
export const poisonDeadLetterReason = 'PoisonMessage';

/** Service Bus caps DeadLetterErrorDescription (and this keeps a property small). */
const maxReasonChars = 1_000;

export interface PoisonOrigin {
  entity: string;
  messageId?: string;
  correlationId?: string;
  deliveryCount?: number;
}

/** The copy sent to `poison`: the same body, a message id fixed by where and what it was. */
export function quarantineCopy(origin: PoisonOrigin, body: unknown, reason: string): ServiceBusMessage {
  const key =
    origin.messageId ??
    createHash('sha256')
      .update(JSON.stringify(body ?? null))
      .digest('hex');
  const applicationProperties: Record<string, string | number> = {
    [poisonProperties.entity]: origin.entity,
    [poisonProperties.reason]: reason.slice(0, maxReasonChars),
  };
  if (origin.messageId !== undefined) applicationProperties[poisonProperties.messageId] = origin.messageId;
  if (origin.deliveryCount !== undefined)
    applicationProperties[poisonProperties.deliveryCount] = origin.deliveryCount;
  const copy: ServiceBusMessage = {
    messageId: `poison:${origin.entity}:${key}`.slice(0, 128),
    body: body ?? null,
    contentType: 'application/json',
    applicationProperties,
  };
  if (origin.correlationId !== undefined) copy.correlationId = origin.correlationId;
  return copy;
}

/** Rounds of receiving from `poison` while looking for our copy; each waits at most `waitMs`. */
const rounds = 5;
const waitMs = 1_000;

/**
 * Sends the copy and dead-letters it. Everything received from `poison` is a quarantined copy, so
 * each one taken is dead-lettered with its own reason (that finishes copies a crashed instance
 * left). Returns when our copy is dead-lettered, or when `poison` looks empty to this receiver:
 * then another instance holds it and dead-letters it.
 */
export async function quarantine(client: ServiceBusClient, copy: ServiceBusMessage): Promise<void> {
  const sender = client.createSender(queues.poison);
  try {
    await sender.sendMessages(copy);
  } finally {
    await sender.close().catch(() => undefined);
  }
  const receiver = client.createReceiver(queues.poison);
  try {
    for (let round = 0; round < rounds; round++) {
      const batch = await receiver.receiveMessages(20, { maxWaitTimeInMs: waitMs });
      for (const m of batch) await receiver.deadLetterMessage(m, deadLetterOptions(m));
      if (batch.length === 0 || batch.some((m) => m.messageId === copy.messageId)) return;
    }
  } finally {
    await receiver.close().catch(() => undefined);
  }
}

function deadLetterOptions(m: ServiceBusReceivedMessage) {
  const reason = m.applicationProperties?.[poisonProperties.reason];
  return {
    deadLetterReason: poisonDeadLetterReason,
    deadLetterErrorDescription:
      typeof reason === 'string' ? reason : 'The message failed its contract (no reason recorded).',
  };
}
