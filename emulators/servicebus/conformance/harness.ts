/**
 * Where the conformance suite runs, first match wins:
 * - SERVICEBUS_CONFORMANCE_CONNECTION_STRING: that endpoint, with a SAS (or emulator) connection
 *   string;
 * - SERVICEBUS_CONFORMANCE_NAMESPACE=<name>.servicebus.windows.net: that Azure namespace, signed
 *   in with Entra ID through DefaultAzureCredential (az login, environment, managed identity...);
 *   infra/conformance/main.bicep creates such a namespace, with local auth disabled;
 * - otherwise the in-repo emulator, started in process on a free port.
 * An external namespace must hold ./Config.json's entities. Tests only use the public SDK API.
 */
import { resolve } from 'node:path';
import type { TokenCredential } from '@azure/identity';
import {
  ServiceBusClient,
  type ServiceBusReceivedMessage,
  type ServiceBusReceiver,
} from '@azure/service-bus';

export const fixtureConfigPath = resolve(
  __dirname,
  '../../../../emulators/servicebus/conformance/Config.json',
);

export const connectionStringVariable = 'SERVICEBUS_CONFORMANCE_CONNECTION_STRING';
export const namespaceVariable = 'SERVICEBUS_CONFORMANCE_NAMESPACE';

export interface Namespace {
  /** Set for the emulator and SERVICEBUS_CONFORMANCE_CONNECTION_STRING. */
  connectionString?: string;
  /** Set for SERVICEBUS_CONFORMANCE_NAMESPACE, with the credential that signs in to it. */
  fullyQualifiedNamespace?: string;
  credential?: TokenCredential;
  external: boolean;
  close(): Promise<void>;
}

/** The host name from SERVICEBUS_CONFORMANCE_NAMESPACE; accepts sb://host/ too. */
export function parseNamespaceHost(value: string): string {
  const host = value
    .trim()
    .replace(/^[a-z]+:\/\//i, '')
    .replace(/\/+$/, '');
  if (!/^[a-z0-9][a-z0-9-]*(\.[a-z0-9-]+)+$/i.test(host)) {
    throw new Error(
      `${namespaceVariable} must be a fully qualified namespace such as myns.servicebus.windows.net, got "${value}"`,
    );
  }
  return host;
}

export async function openNamespace(): Promise<Namespace> {
  const connectionString = process.env[connectionStringVariable];
  const namespace = process.env[namespaceVariable];
  if (connectionString && namespace) {
    throw new Error(`set either ${connectionStringVariable} or ${namespaceVariable}, not both`);
  }
  if (connectionString) return { connectionString, external: true, close: async () => {} };
  if (namespace) {
    const fullyQualifiedNamespace = parseNamespaceHost(namespace);
    // Loaded lazily: only a run against Azure needs it.
    const { DefaultAzureCredential } = await import('@azure/identity');
    return {
      fullyQualifiedNamespace,
      credential: new DefaultAzureCredential(),
      external: true,
      close: async () => {},
    };
  }
  // Loaded lazily so that running against another endpoint never touches the emulator code.
  const { startServiceBusEmulator } = await import('../index.js');
  const emulator = await startServiceBusEmulator({ config: fixtureConfigPath, port: 0 });
  return { connectionString: emulator.connectionString, external: false, close: () => emulator.stop() };
}

export function newClient(ns: Namespace): ServiceBusClient {
  const options = { retryOptions: { maxRetries: 1, timeoutInMs: 20_000 } };
  if (ns.fullyQualifiedNamespace && ns.credential) {
    return new ServiceBusClient(ns.fullyQualifiedNamespace, ns.credential, options);
  }
  if (!ns.connectionString) throw new Error('namespace has neither a connection string nor a credential');
  return new ServiceBusClient(ns.connectionString, options);
}

/** Receives until `count` messages arrived or the deadline passed; never asserts on time. */
export async function receiveAtLeast(
  receiver: ServiceBusReceiver,
  count: number,
  deadlineMs = 20_000,
): Promise<ServiceBusReceivedMessage[]> {
  const out: ServiceBusReceivedMessage[] = [];
  const end = Date.now() + deadlineMs;
  while (out.length < count && Date.now() < end) {
    const batch = await receiver.receiveMessages(count - out.length, {
      maxWaitTimeInMs: Math.min(2_000, Math.max(100, end - Date.now())),
    });
    out.push(...batch);
  }
  return out;
}

/** Empties a queue, subscription or DLQ left over by an earlier run against an external namespace. */
export async function purge(client: ServiceBusClient, receiver: ServiceBusReceiver): Promise<void> {
  void client;
  for (;;) {
    const batch = await receiver.receiveMessages(50, { maxWaitTimeInMs: 300 });
    if (batch.length === 0) return;
    if (receiver.receiveMode === 'peekLock') for (const m of batch) await receiver.completeMessage(m);
  }
}

/** Empties each queue and its dead-letter queue (left over by an earlier run against a namespace). */
export async function purgeQueues(client: ServiceBusClient, names: readonly string[]): Promise<void> {
  for (const q of names) {
    for (const subQueueType of [undefined, 'deadLetter'] as const) {
      const r = client.createReceiver(q, { receiveMode: 'receiveAndDelete', subQueueType });
      await purge(client, r);
      await r.close();
    }
  }
}

/** Waits for a condition with a generous deadline, polling. */
export async function eventually<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  deadlineMs = 30_000,
): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function uniqueId(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}
