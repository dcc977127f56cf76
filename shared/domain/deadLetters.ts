import { createHash } from 'node:crypto';
import { isOrderId } from './orderId.js';

/**
 * What an operator sees of a dead-lettered message and how a redrive names its copy. Pure: the
 * Service Bus side lives in shared/messaging/deadLetters.ts.
 */

/** A queue or a topic subscription whose dead-letter queue the operator can read. */
export type DeadLetterSource =
  | { kind: 'queue'; name: string; queue: string }
  | { kind: 'subscription'; name: string; topic: string; subscription: string };

/** How the operator API names a subscription's dead-letter source (Service Bus's own path form). */
export function subscriptionSourceName(topic: string, subscription: string): string {
  return `${topic}/subscriptions/${subscription}`;
}

/** Every dead-letter source: each queue, then each subscription of each topic. */
export function deadLetterSources(
  queues: readonly string[],
  topicSubscriptions: Readonly<Record<string, readonly string[]>>,
): DeadLetterSource[] {
  return [
    ...queues.map((queue): DeadLetterSource => ({ kind: 'queue', name: queue, queue })),
    ...Object.entries(topicSubscriptions).flatMap(([topic, subscriptions]) =>
      subscriptions.map((subscription): DeadLetterSource => ({
        kind: 'subscription',
        name: subscriptionSourceName(topic, subscription),
        topic,
        subscription,
      })),
    ),
  ];
}

/** Where a redriven copy goes: the queue itself, or the subscription's topic. */
export function redriveTarget(source: DeadLetterSource): string {
  return source.kind === 'queue' ? source.queue : source.topic;
}

/**
 * Where one dead letter's copy goes. A quarantined poison message goes back to the queue it
 * arrived on (its `origin`), which must be one of the app's queues other than the quarantine
 * itself; null when it names none (nothing is sent). Any other source: `redriveTarget`.
 */
export function redriveTargetOf(
  source: DeadLetterSource,
  quarantineQueue: string,
  origin: unknown,
  appQueues: readonly string[],
): string | null {
  if (source.kind !== 'queue' || source.queue !== quarantineQueue) return redriveTarget(source);
  return typeof origin === 'string' && origin !== quarantineQueue && appQueues.includes(origin)
    ? origin
    : null;
}

/**
 * The copy's message id: new (the original id may still sit in the duplicate-detection window and
 * would be dropped), and the same for every redrive of the same dead letter, so a copy re-sent
 * after a crash between "send" and "complete", or by a second operator, is absorbed by duplicate
 * detection. A dead letter is named by its source and its sequence number there, which Service Bus
 * never reuses within an entity.
 */
export function redriveMessageId(source: string, sequenceNumber: string): string {
  const digest = createHash('sha256').update(`${source}\n${sequenceNumber}`).digest('hex');
  return `redrive-${digest.slice(0, 32)}`;
}

/** The order a message names: its correlation id (how the app sends), else the body's orderId. */
export function orderNamedBy(correlationId: unknown, body: unknown): string | null {
  if (isOrderId(correlationId)) return correlationId;
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const orderId = (body as Record<string, unknown>).orderId;
    if (isOrderId(orderId)) return orderId;
  }
  return null;
}

/** Characters of a body an answer carries at most; the rest is cut (the list is for reading). */
export const maxBodyPreviewChars = 4_000;

/** A message body as text an operator can read: JSON as JSON, bytes as UTF-8 (or base64 if not). */
export function bodyPreview(
  body: unknown,
  limit = maxBodyPreviewChars,
): { text: string; truncated: boolean } {
  let text: string;
  if (body === undefined || body === null) text = '';
  else if (typeof body === 'string') text = body;
  else if (body instanceof Uint8Array) {
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(body);
    } catch {
      text = `base64:${Buffer.from(body).toString('base64')}`;
    }
  } else {
    try {
      text = JSON.stringify(body) ?? String(body);
    } catch {
      text = String(body);
    }
  }
  return text.length > limit ? { text: text.slice(0, limit), truncated: true } : { text, truncated: false };
}

/** What the history records of a dead letter, cut to the history's error limit. */
export function deadLetterDetail(
  source: string,
  sequenceNumber: string,
  reason?: string,
  description?: string,
) {
  const why = [reason, description].filter((s) => s !== undefined && s !== '').join(': ');
  return `${source} #${sequenceNumber}${why ? `: ${why}` : ''}`.slice(0, 2_000);
}
