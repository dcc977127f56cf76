import type { ServiceBusClient, ServiceBusMessage, ServiceBusSender } from '@azure/service-bus';
import type { FunctionMetadata, RpcBindingInfo, RpcInvocationResponse, RpcTypedData } from './rpc.js';
import { createServiceBusClient } from './serviceBusTrigger.js';

interface ServiceBusOutput {
  name: string;
  connection: string;
  entity: string;
  kind: 'queue' | 'topic';
}

/**
 * Checks the Service Bus outputs of a function the host runs (outputs of other types make it a
 * function that is not run, see notRun.ts).
 */
export function validateOutputBindings(metadata: FunctionMetadata): void {
  for (const [name, binding] of Object.entries(metadata.bindings)) {
    if (binding.direction !== 'out' || String(binding.type).toLowerCase() !== 'servicebus') continue;
    const { connection } = serviceBusOutputOf(metadata.name, name, binding);
    // Checked now, not on the first send: a missing setting is a start-up error in Azure too.
    const set = (setting: string) => (process.env[setting] ?? '').trim() !== '';
    if (!set(connection) && !set(`${connection}__fullyQualifiedNamespace`)) {
      throw new Error(
        `Function "${metadata.name}": Service Bus output binding "${name}" needs the app setting ${connection} ` +
          `(a connection string) or ${connection}__fullyQualifiedNamespace.`,
      );
    }
  }
}

function serviceBusOutputOf(functionName: string, name: string, binding: RpcBindingInfo): ServiceBusOutput {
  const text = (key: string): string | undefined =>
    typeof binding[key] === 'string' && binding[key] !== '' ? (binding[key] as string) : undefined;
  const queueName = text('queueName');
  const topicName = text('topicName');
  if (!queueName && !topicName) {
    throw new Error(
      `Function "${functionName}": Service Bus output binding "${name}" needs queueName or topicName.`,
    );
  }
  return {
    name,
    connection: text('connection') ?? 'AzureWebJobsServiceBus',
    entity: (queueName ?? topicName) as string,
    kind: queueName ? 'queue' : 'topic',
  };
}

/**
 * One value the function set becomes messages the way the Service Bus extension makes them for a
 * Node function: an array is one message per element; text is sent as UTF-8 bytes, anything else
 * as its JSON, bytes as they are.
 */
export function toOutputMessages(data: RpcTypedData | null | undefined): ServiceBusMessage[] {
  if (!data) return [];
  if (data.bytes) return [{ body: Buffer.from(data.bytes) }];
  if (typeof data.string === 'string') return [{ body: Buffer.from(data.string, 'utf8') }];
  if (typeof data.int === 'number') return [{ body: Buffer.from(String(data.int)) }];
  if (typeof data.double === 'number') return [{ body: Buffer.from(String(data.double)) }];
  if (typeof data.json !== 'string') return [];
  const value: unknown = JSON.parse(data.json);
  const elements = Array.isArray(value) ? (value as unknown[]) : [value];
  return elements
    .filter((element) => element !== null && element !== undefined)
    .map((element) => ({
      body: Buffer.from(typeof element === 'string' ? element : JSON.stringify(element), 'utf8'),
    }));
}

/**
 * Sends a finished invocation's Service Bus outputs before the trigger is answered (the HTTP
 * response written, the trigger message completed), like the Azure host flushes its output
 * bindings. A failed send fails the invocation, so nothing is lost silently.
 */
export class OutputBindings {
  private readonly clients = new Map<string, Promise<ServiceBusClient>>();
  private readonly senders = new Map<string, ServiceBusSender>();

  async send(metadata: FunctionMetadata, response: RpcInvocationResponse): Promise<void> {
    for (const [name, binding] of Object.entries(metadata.bindings)) {
      if (binding.direction !== 'out' || String(binding.type).toLowerCase() !== 'servicebus') continue;
      const output = serviceBusOutputOf(metadata.name, name, binding);
      const data =
        name === '$return' ? response.returnValue : response.outputData?.find((o) => o.name === name)?.data;
      const messages = toOutputMessages(data);
      if (messages.length === 0) continue;
      try {
        const sender = await this.senderFor(output);
        await sender.sendMessages(messages).catch(async (err: unknown) => {
          // A sender whose entity is missing stays broken: the next invocation makes a new one.
          this.senders.delete(`${output.connection}\n${output.entity}`);
          await sender.close().catch(() => undefined);
          throw err;
        });
      } catch (err) {
        throw new Error(
          `Service Bus output "${name}" to ${output.kind} ${output.entity} failed: ${(err as Error).message}`,
        );
      }
    }
  }

  private async senderFor(output: ServiceBusOutput): Promise<ServiceBusSender> {
    const key = `${output.connection}\n${output.entity}`;
    let sender = this.senders.get(key);
    if (!sender) {
      let client = this.clients.get(output.connection);
      if (!client) {
        client = createServiceBusClient(output.connection);
        this.clients.set(output.connection, client);
        client.catch(() => this.clients.delete(output.connection));
      }
      sender = (await client).createSender(output.entity);
      this.senders.set(key, sender);
    }
    return sender;
  }

  async close(): Promise<void> {
    await Promise.all([...this.senders.values()].map((s) => s.close().catch(() => undefined)));
    this.senders.clear();
    const clients = await Promise.allSettled([...this.clients.values()]);
    await Promise.all(
      clients.map((c) => (c.status === 'fulfilled' ? c.value.close().catch(() => undefined) : undefined)),
    );
    this.clients.clear();
  }
}
