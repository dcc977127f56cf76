import type { ServiceBusClient, ServiceBusReceivedMessage, ServiceBusReceiver } from '@azure/service-bus';
import { InvocationError, type Invoker } from './invoker.js';
import type { LogSink } from './logger.js';
import type { RpcTypedData } from './rpc.js';
import {
  closeWithin,
  openTriggerReceiver,
  deliveryCountOf,
  describeEntity,
  toTriggerData,
  type ServiceBusTriggerConfig,
} from './serviceBusTrigger.js';
import { messageTraceContext } from './traceContext.js';

/**
 * The Service Bus extension renews a batch's locks while its function runs, for its fixed default
 * (5 minutes): host.json's maxAutoLockRenewalDuration is documented for single-message functions.
 */
const batchLockRenewalMs = 5 * 60_000;
/** How long one receive waits for a first message before asking again (stop aborts it sooner). */
const receiveWaitMs = 10_000;

/**
 * A string[] as the Azure host hands it to the worker (`collection_string`): it leaves out null
 * and empty entries (RpcMessageConversionExtensions.ToRpcStringArray), so such an array can be
 * shorter than the batch, in Azure and here alike.
 */
function strings(values: (string | undefined | null)[]): RpcTypedData {
  return {
    collectionString: { string: values.filter((v): v is string => typeof v === 'string' && v !== '') },
  };
}

function isoOrNull(value: Date | undefined): string | null {
  return value instanceof Date && !Number.isNaN(value.getTime()) ? value.toISOString() : null;
}

function sequenceNumberOf(message: ServiceBusReceivedMessage): number {
  const value: unknown = message.sequenceNumber;
  if (typeof value === 'number') return value;
  if (typeof (value as { toNumber?: () => number } | undefined)?.toNumber === 'function')
    return (value as { toNumber(): number }).toNumber();
  return Number(value ?? 0);
}

/**
 * The handler's argument for a batch: each body as text (the library parses JSON per element), or
 * as bytes for `dataType: 'binary'`, like the host's string[] / byte[][] for `cardinality: 'many'`.
 */
export function toBatchTriggerData(messages: ServiceBusReceivedMessage[], binary: boolean): RpcTypedData {
  if (binary) {
    return { collectionBytes: { bytes: messages.map((m) => toTriggerData(m, true).bytes as Uint8Array) } };
  }
  return strings(
    messages.map((m) => {
      const data = toTriggerData(m, false);
      return data.string ?? data.json;
    }),
  );
}

/**
 * The Service Bus extension's batch binding data (`<Name>Array`, one entry per message), typed as
 * the host sends them to a Node worker: string arrays as collections, long[] (sequence numbers)
 * as a sint64 collection, and the rest (int[], DateTime[], dictionaries) as JSON. The library
 * camel-cases the names: `MessageIdArray` reaches the handler as `triggerMetadata.messageIdArray`.
 */
export function toBatchTriggerMetadata(messages: ServiceBusReceivedMessage[]): Record<string, RpcTypedData> {
  const json = (values: unknown[]): RpcTypedData => ({ json: JSON.stringify(values) });
  const expires = messages.map((m) => isoOrNull(m.expiresAtUtc));
  const enqueued = messages.map((m) => isoOrNull(m.enqueuedTimeUtc));
  const subjects = strings(messages.map((m) => m.subject));
  const properties = json(messages.map((m) => m.applicationProperties ?? {}));
  const partitionKeys = strings(messages.map((m) => m.partitionKey));
  return {
    DeliveryCountArray: json(messages.map(deliveryCountOf)),
    DeadLetterSourceArray: strings(messages.map((m) => m.deadLetterSource)),
    LockTokenArray: strings(messages.map((m) => m.lockToken)),
    ExpiresAtUtcArray: json(expires),
    ExpiresAtArray: json(expires),
    EnqueuedTimeUtcArray: json(enqueued),
    EnqueuedTimeArray: json(enqueued),
    MessageIdArray: strings(
      messages.map((m) => (m.messageId === undefined ? undefined : String(m.messageId))),
    ),
    ContentTypeArray: strings(messages.map((m) => m.contentType)),
    ReplyToArray: strings(messages.map((m) => m.replyTo)),
    SequenceNumberArray: { collectionSint64: { sint64: messages.map(sequenceNumberOf) } },
    ToArray: strings(messages.map((m) => m.to)),
    SubjectArray: subjects,
    LabelArray: subjects,
    CorrelationIdArray: strings(
      messages.map((m) => (m.correlationId === undefined ? undefined : String(m.correlationId))),
    ),
    ApplicationPropertiesArray: properties,
    UserPropertiesArray: properties,
    SessionIdArray: strings(messages.map((m) => m.sessionId)),
    ReplyToSessionIdArray: strings(messages.map((m) => m.replyToSessionId)),
    PartitionKeyArray: partitionKeys,
    // The extension fills this one from the partition keys too.
    TransactionPartitionKeyArray: partitionKeys,
  };
}

interface Batch {
  messages: ServiceBusReceivedMessage[];
  receiver: ServiceBusReceiver;
  settled: boolean;
  settling?: Promise<void>;
}

/**
 * A batch (`cardinality: 'many'`) Service Bus trigger: one peek-lock receive loop that hands the
 * handler up to maxMessageBatchSize messages per call, one call at a time (maxConcurrentCalls
 * is for single-message functions), then completes every message on success or abandons every
 * one on a throw (autoCompleteMessages), as the Service Bus extension does.
 */
export class ServiceBusBatchTrigger {
  private client: ServiceBusClient | undefined;
  private receiver: ServiceBusReceiver | undefined;
  private stopping = false;
  private abort: AbortController | undefined;
  private wake: (() => void) | undefined;
  private current: Batch | undefined;
  private loop: Promise<void> | undefined;

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
    this.loop = this.run();
  }

  private async connect(): Promise<void> {
    // The SDK would renew received messages' locks until settled, so an unsettled batch
    // (autoCompleteMessages false) would be held for minutes; renewal is done per invocation instead.
    const { client, receiver } = await openTriggerReceiver(this.config, 0);
    this.client = client;
    this.receiver = receiver;
  }

  private async run(): Promise<void> {
    let retryDelayMs = 1000;
    while (!this.stopping) {
      const receiver = this.receiver;
      if (!receiver) break;
      let messages: ServiceBusReceivedMessage[];
      try {
        this.abort = new AbortController();
        messages = await receiver.receiveMessages(this.config.maxMessageBatchSize, {
          maxWaitTimeInMs: receiveWaitMs,
          abortSignal: this.abort.signal,
        });
      } catch (err) {
        if (this.stopping) break;
        this.log({
          level: 'warning',
          category: 'host',
          functionName: this.name,
          message: `Service Bus receiver for ${describeEntity(this.config.entity)}: ${(err as Error).message}; re-creating it in ${retryDelayMs} ms`,
        });
        await this.pause(retryDelayMs);
        retryDelayMs = Math.min(retryDelayMs * 2, 30_000);
        await this.reconnect();
        continue;
      }
      if (messages.length === 0) continue;
      retryDelayMs = 1000;
      await this.process(messages, receiver);
    }
  }

  /** Waits, unless stop comes first. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** The Azure host re-creates a listener that failed; closing the old one can be slow, so it is not awaited. */
  private async reconnect(): Promise<void> {
    if (this.stopping) return;
    const old = { receiver: this.receiver, client: this.client };
    this.receiver = undefined;
    this.client = undefined;
    void (async () => {
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
      this.receiver = old.receiver;
      this.client = old.client;
    }
  }

  private async process(messages: ServiceBusReceivedMessage[], receiver: ServiceBusReceiver): Promise<void> {
    const batch: Batch = { messages, receiver, settled: false };
    this.current = batch;
    const stopRenewing = this.renewLocks(batch);
    try {
      let succeeded = true;
      try {
        await this.invoker.invoke(this.config.fn, {
          data: toBatchTriggerData(messages, this.config.binary),
          triggerMetadata: toBatchTriggerMetadata(messages),
          traceContext: messageTraceContext(messages[0].applicationProperties),
          reason: `(null)MessageReceiver='${describeEntity(this.config.entity)}', MessageCount=${messages.length}`,
        });
      } catch (err) {
        if (!(err instanceof InvocationError)) throw err;
        succeeded = false;
      } finally {
        stopRenewing();
      }
      if (!this.config.autoCompleteMessages || batch.settled) return;
      batch.settled = true;
      batch.settling = this.settle(batch, succeeded ? 'complete' : 'abandon');
      await batch.settling;
    } finally {
      if (this.current === batch) this.current = undefined;
    }
  }

  /**
   * Keeps the batch's locks while the function runs (halfway through each lock, for at most
   * batchLockRenewalMs), like the extension; returns the function that stops it.
   */
  private renewLocks(batch: Batch): () => void {
    const deadline = Date.now() + batchLockRenewalMs;
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    let warned = false;
    const schedule = (): void => {
      const lockedUntil = Math.min(
        ...batch.messages.map((m) => m.lockedUntilUtc?.getTime() ?? Date.now() + 60_000),
      );
      const delay = Math.max(200, (lockedUntil - Date.now()) / 2);
      if (stopped || Date.now() + delay > deadline) return;
      timer = setTimeout(() => {
        void Promise.all(
          batch.messages.map((m) =>
            batch.receiver.renewMessageLock(m).catch((err: unknown) => {
              if (warned || stopped) return;
              warned = true;
              this.log({
                level: 'warning',
                category: 'host',
                functionName: this.name,
                message: `Could not renew the lock of message ${String(m.messageId)}: ${(err as Error).message}`,
              });
            }),
          ),
        ).then(schedule);
      }, delay);
      timer.unref();
    };
    schedule();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }

  private async settle(batch: Batch, action: 'complete' | 'abandon'): Promise<void> {
    const failures: string[] = [];
    await Promise.all(
      batch.messages.map(async (message) => {
        try {
          if (action === 'complete') await batch.receiver.completeMessage(message);
          else await batch.receiver.abandonMessage(message);
        } catch (err) {
          failures.push(`${String(message.messageId)}: ${(err as Error).message}`);
        }
      }),
    );
    if (failures.length > 0) {
      // A lost lock means the broker already made the message available again; nothing to undo.
      this.log({
        level: 'warning',
        category: 'host',
        functionName: this.name,
        message: `Could not ${action} ${failures.length} of ${batch.messages.length} message(s): ${failures.join('; ')}`,
      });
    }
  }

  /** Stops taking batches; the batch in flight can still be settled. */
  async stopReceiving(): Promise<void> {
    this.stopping = true;
    this.abort?.abort();
    this.wake?.();
    await Promise.resolve();
  }

  /** After the grace period: abandon a batch still running, then close the link and connection. */
  async close(): Promise<void> {
    const batch = this.current;
    if (batch && !batch.settled) {
      batch.settled = true;
      batch.settling = this.settle(batch, 'abandon');
      this.log({
        level: 'warning',
        category: 'host',
        functionName: this.name,
        message: `Abandoning the ${batch.messages.length} message(s) of the batch still running.`,
      });
    }
    await closeWithin(batch?.settling);
    await closeWithin(
      this.loop?.catch(() => undefined),
      1_000,
    );
    await closeWithin(this.receiver?.close());
    await closeWithin(this.client?.close());
  }
}
