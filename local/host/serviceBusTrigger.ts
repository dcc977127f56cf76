import {
  ServiceBusClient,
  type ServiceBusReceivedMessage,
  type ServiceBusReceiver,
} from '@azure/service-bus';
import type { RegisteredFunction } from './coreApi.js';
import { InvocationError, type Invoker } from './invoker.js';
import type { LogSink } from './logger.js';
import type { RpcTypedData } from './rpc.js';
import type { HostJson } from './settings.js';
import { messageTraceContext } from './traceContext.js';

export interface ServiceBusTriggerConfig {
  fn: RegisteredFunction;
  /** The entity path as the receiver sees it: a queue, or `topic/Subscriptions/subscription`. */
  entity: { queueName: string } | { topicName: string; subscriptionName: string };
  connection: string;
  autoCompleteMessages: boolean;
  maxConcurrentCalls: number;
  maxAutoLockRenewalDurationMs: number;
  binary: boolean;
  /** `cardinality: 'many'`: the handler gets arrays of up to maxMessageBatchSize messages. */
  batch: boolean;
  maxMessageBatchSize: number;
}

export function describeEntity(entity: ServiceBusTriggerConfig['entity']): string {
  return 'queueName' in entity
    ? entity.queueName
    : `${entity.topicName}/Subscriptions/${entity.subscriptionName}`;
}

/**
 * Reads the trigger binding like the Service Bus extension: `connection` names an app setting
 * (`AzureWebJobsServiceBus` when absent); settings come from host.json unless the binding overrides.
 */
export function toServiceBusTriggerConfig(
  fn: RegisteredFunction,
  triggerName: string,
  hostJson: HostJson,
): ServiceBusTriggerConfig {
  const b = fn.metadata.bindings[triggerName];
  const name = fn.metadata.name;
  const text = (key: string): string | undefined =>
    typeof b[key] === 'string' && b[key] !== '' ? (b[key] as string) : undefined;
  const queueName = text('queueName');
  const topicName = text('topicName');
  const subscriptionName = text('subscriptionName');
  let entity: ServiceBusTriggerConfig['entity'];
  if (queueName) entity = { queueName };
  else if (topicName && subscriptionName) entity = { topicName, subscriptionName };
  else
    throw new Error(
      `Function "${name}": a Service Bus trigger needs queueName, or topicName and subscriptionName.`,
    );
  return {
    fn,
    entity,
    connection: text('connection') ?? 'AzureWebJobsServiceBus',
    autoCompleteMessages:
      typeof b.autoCompleteMessages === 'boolean'
        ? b.autoCompleteMessages
        : hostJson.serviceBus.autoCompleteMessages,
    maxConcurrentCalls: hostJson.serviceBus.maxConcurrentCalls,
    maxAutoLockRenewalDurationMs: hostJson.serviceBus.maxAutoLockRenewalDurationMs,
    binary: String(b.dataType ?? '').toLowerCase() === 'binary',
    batch: String(b.cardinality ?? '').toLowerCase() === 'many',
    maxMessageBatchSize: hostJson.serviceBus.maxMessageBatchSize,
  };
}

/** A connection string from the setting itself, or a namespace for identity-based connections. */
export async function createServiceBusClient(connection: string): Promise<ServiceBusClient> {
  const connectionString = process.env[connection];
  if (connectionString && connectionString.trim() !== '') return new ServiceBusClient(connectionString);
  const namespace = process.env[`${connection}__fullyQualifiedNamespace`];
  if (namespace && namespace.trim() !== '') {
    const { DefaultAzureCredential } = await import('@azure/identity');
    return new ServiceBusClient(namespace, new DefaultAzureCredential());
  }
  throw new Error(
    `Service Bus connection "${connection}": set the app setting ${connection} (a connection string) or ${connection}__fullyQualifiedNamespace.`,
  );
}

/** The message body as the host hands it to a Node function: text (the library parses JSON), or bytes. */
/**
 * The trigger's client and peek-lock receiver on its queue or subscription. The host hands the
 * raw body to the worker (the library decides about JSON).
 */
export async function openTriggerReceiver(
  config: ServiceBusTriggerConfig,
  maxAutoLockRenewalDurationInMs: number,
): Promise<{ client: ServiceBusClient; receiver: ServiceBusReceiver }> {
  const { entity } = config;
  const client = await createServiceBusClient(config.connection);
  const options = {
    receiveMode: 'peekLock' as const,
    skipParsingBodyAsJson: true,
    maxAutoLockRenewalDurationInMs,
  };
  const receiver =
    'queueName' in entity
      ? client.createReceiver(entity.queueName, options)
      : client.createReceiver(entity.topicName, entity.subscriptionName, options);
  return { client, receiver };
}

export function toTriggerData(message: ServiceBusReceivedMessage, binary: boolean): RpcTypedData {
  const body: unknown = message.body;
  if (binary) {
    if (Buffer.isBuffer(body)) return { bytes: body };
    return { bytes: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body ?? null)) };
  }
  if (Buffer.isBuffer(body)) return { string: body.toString('utf8') };
  if (body instanceof Uint8Array) return { string: Buffer.from(body).toString('utf8') };
  if (typeof body === 'string') return { string: body };
  return { json: JSON.stringify(body ?? null) };
}

function str(value: unknown): RpcTypedData | undefined {
  if (value === undefined || value === null) return undefined;
  if (Buffer.isBuffer(value)) return { string: value.toString('hex') };
  return { string: String(value) };
}

function iso(value: Date | undefined): RpcTypedData | undefined {
  return value instanceof Date && !Number.isNaN(value.getTime())
    ? { string: value.toISOString() }
    : undefined;
}

function longToNumber(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'number') return value;
  if (typeof (value as { toNumber?: () => number }).toNumber === 'function')
    return (value as { toNumber(): number }).toNumber();
  return Number(value);
}

/**
 * The AMQP header counts prior failed deliveries and the JS SDK shows it as is (0 on the first
 * delivery); the .NET SDK under the Functions host adds one for received messages, so a handler
 * sees 1 on the first delivery and MaxDeliveryCount on the last.
 */
export function deliveryCountOf(message: ServiceBusReceivedMessage): number {
  return (message.deliveryCount ?? 0) + 1;
}

/**
 * Trigger metadata with the Service Bus extension's names (the library camel-cases them:
 * `DeliveryCount` reaches the handler as `context.triggerMetadata.deliveryCount`).
 */
export function toTriggerMetadata(message: ServiceBusReceivedMessage): Record<string, RpcTypedData> {
  const sequenceNumber = longToNumber(message.sequenceNumber);
  const properties = JSON.stringify(message.applicationProperties ?? {});
  const entries: Record<string, RpcTypedData | undefined> = {
    DeliveryCount: { int: deliveryCountOf(message) },
    DeadLetterSource: str(message.deadLetterSource),
    LockToken: str(message.lockToken),
    ExpiresAtUtc: iso(message.expiresAtUtc),
    ExpiresAt: iso(message.expiresAtUtc),
    EnqueuedTimeUtc: iso(message.enqueuedTimeUtc),
    EnqueuedTime: iso(message.enqueuedTimeUtc),
    MessageId: str(message.messageId),
    ContentType: str(message.contentType),
    ReplyTo: str(message.replyTo),
    SequenceNumber: sequenceNumber === undefined ? undefined : { int: sequenceNumber },
    To: str(message.to),
    Label: str(message.subject),
    Subject: str(message.subject),
    CorrelationId: str(message.correlationId),
    SessionId: str(message.sessionId),
    ReplyToSessionId: str(message.replyToSessionId),
    PartitionKey: str(message.partitionKey),
    ApplicationProperties: { json: properties },
    UserProperties: { json: properties },
  };
  const result: Record<string, RpcTypedData> = {};
  for (const [key, value] of Object.entries(entries)) if (value) result[key] = value;
  return result;
}

/**
 * One Service Bus trigger: peek-lock receiver, up to maxConcurrentCalls invocations at once,
 * locks renewed up to maxAutoLockRenewalDuration, complete on success and abandon on failure
 * (autoCompleteMessages). Dead-lettering past MaxDeliveryCount is the broker's job.
 */
export class ServiceBusTrigger {
  private client: ServiceBusClient | undefined;
  private receiver: ServiceBusReceiver | undefined;
  private subscription: { close(): Promise<void> } | undefined;
  private readonly inFlight = new Map<ServiceBusReceivedMessage, ServiceBusReceiver>();
  private readonly settled = new WeakSet<ServiceBusReceivedMessage>();
  private stopping = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private restartDelayMs = 1000;
  private watchdog: NodeJS.Timeout | undefined;

  constructor(
    readonly config: ServiceBusTriggerConfig,
    private readonly invoker: Invoker,
    private readonly log: LogSink,
  ) {}

  get name(): string {
    return this.config.fn.metadata.name;
  }

  async start(): Promise<void> {
    this.stopping = false;
    await this.connect();
  }

  private async connect(): Promise<void> {
    const { client, receiver } = await openTriggerReceiver(
      this.config,
      this.config.maxAutoLockRenewalDurationMs,
    );
    this.client = client;
    this.receiver = receiver;
    this.subscription = receiver.subscribe(
      {
        processMessage: (message) => this.process(message, receiver),
        processError: async (args) => {
          this.log({
            level: 'warning',
            category: 'host',
            functionName: this.name,
            message: `Service Bus receiver for ${describeEntity(this.config.entity)} (${args.errorSource}): ${args.error.message}`,
          });
          // A receive-side error can leave the SDK's subscription dead (e.g. the broker went away
          // and came back). The Azure host re-creates its listeners; so do we.
          // Only the current receiver's errors count: an old one being closed reports too.
          if (args.errorSource === 'receive' && receiver === this.receiver) this.scheduleRestart();
        },
      },
      { autoCompleteMessages: false, maxConcurrentCalls: this.config.maxConcurrentCalls },
    );
    this.watch(receiver);
  }

  /**
   * The SDK can also lose its receive link without reporting an error (seen when the broker
   * restarts). Look at the link every few seconds; closed twice in a row means re-create. The
   * link state is not public API, so where it cannot be read this does nothing.
   */
  private watch(receiver: ServiceBusReceiver): void {
    if (this.watchdog) clearInterval(this.watchdog);
    let closedChecks = 0;
    this.watchdog = setInterval(() => {
      const link = (receiver as unknown as { _streamingReceiver?: { isOpen?: () => boolean } })
        ._streamingReceiver;
      if (this.stopping || typeof link?.isOpen !== 'function') return;
      closedChecks = link.isOpen() ? 0 : closedChecks + 1;
      if (closedChecks >= 2) {
        closedChecks = 0;
        this.scheduleRestart();
      }
    }, 5_000);
    this.watchdog.unref();
  }

  private scheduleRestart(): void {
    if (this.restartTimer || this.stopping) return;
    const delay = this.restartDelayMs;
    this.restartDelayMs = Math.min(delay * 2, 30_000);
    this.log({
      level: 'warning',
      category: 'host',
      functionName: this.name,
      message: `Re-creating the Service Bus receiver for ${describeEntity(this.config.entity)} in ${delay} ms`,
    });
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      void this.restart();
    }, delay);
  }

  private async restart(): Promise<void> {
    if (this.stopping) return;
    const old = { subscription: this.subscription, receiver: this.receiver, client: this.client };
    this.subscription = undefined;
    this.receiver = undefined;
    this.client = undefined;
    // Closing a client whose connection is gone can take as long as the SDK's own retries (about
    // 30 s, seen in the chaos suite's broker SIGKILL): close the old one in the background and
    // connect the new one now.
    void (async () => {
      await old.subscription?.close().catch(() => undefined);
      await old.receiver?.close().catch(() => undefined);
      await old.client?.close().catch(() => undefined);
    })();
    try {
      await this.connect();
    } catch (err) {
      this.log({
        level: 'warning',
        category: 'host',
        functionName: this.name,
        message: `Could not re-create the receiver: ${(err as Error).message}`,
      });
      this.scheduleRestart();
    }
  }

  private async process(message: ServiceBusReceivedMessage, receiver: ServiceBusReceiver): Promise<void> {
    this.inFlight.set(message, receiver);
    try {
      let succeeded = true;
      try {
        await this.invoker.invoke(this.config.fn, {
          data: toTriggerData(message, this.config.binary),
          triggerMetadata: toTriggerMetadata(message),
          traceContext: messageTraceContext(message.applicationProperties),
          reason: `(null)MessageReceiver='${describeEntity(this.config.entity)}', MessageId=${String(message.messageId)}, DeliveryCount=${deliveryCountOf(message)}`,
        });
      } catch (err) {
        if (!(err instanceof InvocationError)) throw err;
        succeeded = false;
      }
      if (!this.config.autoCompleteMessages || this.settled.has(message)) return;
      this.settled.add(message);
      if (succeeded) this.restartDelayMs = 1000;
      await this.settle(message, succeeded ? 'complete' : 'abandon', receiver);
    } finally {
      this.inFlight.delete(message);
    }
  }

  /** Settles through the receiver that received the message (the only one that can). */
  private async settle(
    message: ServiceBusReceivedMessage,
    action: 'complete' | 'abandon',
    receiver: ServiceBusReceiver | undefined = this.receiver,
  ): Promise<void> {
    if (!receiver) return;
    try {
      if (action === 'complete') await receiver.completeMessage(message);
      else await receiver.abandonMessage(message);
    } catch (err) {
      // A lost lock means the broker already made the message available again; nothing to undo.
      this.log({
        level: 'warning',
        category: 'host',
        functionName: this.name,
        message: `Could not ${action} message ${String(message.messageId)}: ${(err as Error).message}`,
      });
    }
  }

  /** Stops receiving new messages; settlement of in-flight ones still works. */
  async stopReceiving(): Promise<void> {
    this.stopping = true;
    if (this.watchdog) clearInterval(this.watchdog);
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    await closeWithin(this.subscription?.close());
  }

  /** After the grace period: abandon what is still running, then close the link and connection. */
  async close(): Promise<void> {
    const leftovers = [...this.inFlight].filter(([m]) => !this.settled.has(m));
    for (const [message] of leftovers) this.settled.add(message);
    await Promise.all(leftovers.map(([m, receiver]) => this.settle(m, 'abandon', receiver)));
    await closeWithin(this.receiver?.close());
    await closeWithin(this.client?.close());
  }
}

/**
 * Closing an SDK link or client whose broker went away waits out the SDK's own retries (about
 * 30 s, seen in the chaos suite). A dead link takes no more work anyway, so shutdown waits at
 * most `ms` for it and moves on.
 */
export async function closeWithin(closing: Promise<void> | undefined, ms = 3_000): Promise<void> {
  if (!closing) return;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  await Promise.race([closing.catch(() => undefined), timeout]);
  clearTimeout(timer);
}
