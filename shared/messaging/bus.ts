import {
  RetryMode,
  ServiceBusClient,
  type RetryOptions,
  type ServiceBusMessage,
  type ServiceBusReceiver,
  type ServiceBusSender,
} from '@azure/service-bus';
import { DefaultAzureCredential } from '@azure/identity';
import type { ServiceBusConnection } from '../config/settings.js';
import { messageTraceProperties } from '../observability/tracing.js';
import { quarantine, quarantineCopy, type PoisonOrigin } from './quarantine.js';

/** One message to send: the body is JSON; the id is deterministic so duplicates are absorbed. */
export interface OutgoingMessage {
  messageId: string;
  body: unknown;
  subject?: string;
  correlationId?: string;
  /** Service Bus drops the message unread after this long (agent requests die at complete-by). */
  timeToLiveMs?: number;
  /** Deliver no earlier than this (the Supervisor's extended back-off). */
  scheduledEnqueueTime?: Date;
  applicationProperties?: Record<string, string | number | boolean>;
}

/** Counts of what the app asked Service Bus to do, for the cost benchmarks. */
export interface BusCounters {
  sends: number;
  messages: number;
}

/** A message received with peek-lock from a queue no trigger listens on: settled by its reader. */
export interface PulledMessage {
  messageId: string;
  body: unknown;
  deliveryCount: number;
  enqueuedAt?: Date;
  /** Done with it: it leaves the queue. */
  complete(): Promise<void>;
  /** Not handled: back to the queue's head at once, its delivery count one higher. */
  abandon(): Promise<void>;
  /** Unreadable: to the queue's dead letters with the reason. */
  deadLetter(reason: string, description: string): Promise<void>;
}

/** The narrow port the Scheduler, Agents and Supervisor use to talk through Service Bus. */
export interface MessageBus {
  send(entity: string, messages: OutgoingMessage[]): Promise<void>;
  /**
   * Receives up to `max` messages (peek-lock) from a queue no trigger listens on, waiting at most
   * `maxWaitMs` for the first (an Agent's waiting queue: shared/agents/pullWaiting.ts).
   */
  pull?(entity: string, max: number, maxWaitMs: number): Promise<PulledMessage[]>;
  /** Dead-letters a poison message on its first delivery (quarantine.ts); absent: the broker does, later. */
  quarantine?(origin: PoisonOrigin, body: unknown, reason: string): Promise<void>;
  readonly counters: BusCounters;
  close(): Promise<void>;
}

/**
 * How a send retries when Service Bus throttles (ServerBusy) or the link drops: exponential
 * back-off from 500 ms, capped at 8 s, six retries. The SDK's default waits a fixed 30 s between
 * three retries, far past a step's complete-by; host.json sets the same shape for the host's own
 * triggers (`clientRetryOptions`).
 */
export const serviceBusRetryOptions: Readonly<RetryOptions> = Object.freeze({
  mode: RetryMode.Exponential,
  maxRetries: 6,
  retryDelayInMs: 500,
  maxRetryDelayInMs: 8_000,
  timeoutInMs: 30_000,
});

export function createServiceBusClient(connection: ServiceBusConnection): ServiceBusClient {
  const options = { retryOptions: { ...serviceBusRetryOptions } };
  return connection.kind === 'connectionString'
    ? new ServiceBusClient(connection.connectionString, options)
    : new ServiceBusClient(connection.fullyQualifiedNamespace, new DefaultAzureCredential(), options);
}

function toServiceBusMessage(m: OutgoingMessage): ServiceBusMessage {
  const message: ServiceBusMessage = {
    messageId: m.messageId,
    body: m.body,
    contentType: 'application/json',
  };
  if (m.subject !== undefined) message.subject = m.subject;
  if (m.correlationId !== undefined) message.correlationId = m.correlationId;
  if (m.timeToLiveMs !== undefined) message.timeToLive = Math.max(1000, Math.floor(m.timeToLiveMs));
  if (m.scheduledEnqueueTime !== undefined) message.scheduledEnqueueTimeUtc = m.scheduledEnqueueTime;
  // The sender's span travels with the message: the receiving host reads Diagnostic-Id into the
  // invocation's trace context. Empty when nothing is traced.
  const traced = messageTraceProperties();
  if (m.applicationProperties !== undefined || traced['Diagnostic-Id'] !== undefined)
    message.applicationProperties = { ...traced, ...m.applicationProperties };
  return message;
}

/** A MessageBus over one ServiceBusClient, with one cached sender per entity. */
export class ServiceBusMessageBus implements MessageBus {
  readonly counters: BusCounters = { sends: 0, messages: 0 };
  private readonly senders = new Map<string, ServiceBusSender>();
  private readonly receivers = new Map<string, ServiceBusReceiver[]>();
  private readonly links = new Set<ServiceBusReceiver>();

  constructor(readonly client: ServiceBusClient) {}

  static fromConnection(connection: ServiceBusConnection): ServiceBusMessageBus {
    return new ServiceBusMessageBus(createServiceBusClient(connection));
  }

  private sender(entity: string): ServiceBusSender {
    let sender = this.senders.get(entity);
    if (!sender) {
      sender = this.client.createSender(entity);
      this.senders.set(entity, sender);
    }
    return sender;
  }

  async send(entity: string, messages: OutgoingMessage[]): Promise<void> {
    if (messages.length === 0) return;
    // One send per call: a batch of our few-KiB messages always fits one AMQP transfer.
    await this.sender(entity).sendMessages(messages.map(toServiceBusMessage));
    this.counters.sends += 1;
    this.counters.messages += messages.length;
  }

  async pull(entity: string, max: number, maxWaitMs: number): Promise<PulledMessage[]> {
    // A receiver takes one receive at a time (the SDK refuses a second): one per concurrent pull,
    // kept for the next. A message is settled on the receiver that read it.
    const idle = this.receivers.get(entity) ?? [];
    this.receivers.set(entity, idle);
    const r = idle.pop() ?? this.client.createReceiver(entity, { receiveMode: 'peekLock' });
    this.links.add(r);
    try {
      const got = await r.receiveMessages(max, { maxWaitTimeInMs: maxWaitMs });
      return got.map((m) => ({
        messageId: String(m.messageId ?? ''),
        body: m.body as unknown,
        deliveryCount: m.deliveryCount ?? 1,
        ...(m.enqueuedTimeUtc ? { enqueuedAt: m.enqueuedTimeUtc } : {}),
        complete: () => r.completeMessage(m),
        abandon: () => r.abandonMessage(m),
        deadLetter: (reason, description) =>
          r.deadLetterMessage(m, { deadLetterReason: reason, deadLetterErrorDescription: description }),
      }));
    } finally {
      idle.push(r);
    }
  }

  quarantine(origin: PoisonOrigin, body: unknown, reason: string): Promise<void> {
    return quarantine(this.client, quarantineCopy(origin, body, reason));
  }

  async close(): Promise<void> {
    const links = [...this.senders.values(), ...this.links];
    this.senders.clear();
    this.receivers.clear();
    this.links.clear();
    await Promise.allSettled(links.map((l) => l.close()));
    await this.client.close();
  }
}
