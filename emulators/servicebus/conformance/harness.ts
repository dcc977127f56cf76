/**
 * Where the conformance suite runs: against SERVICEBUS_CONFORMANCE_CONNECTION_STRING when set
 * (its entities must match ./Config.json), otherwise against the in-repo emulator started in
 * process on a free port with that same Config.json. Tests only use the public SDK API.
 */
import { resolve } from 'node:path';
import {
  ServiceBusClient,
  type ServiceBusReceivedMessage,
  type ServiceBusReceiver,
} from '@azure/service-bus';

export const fixtureConfigPath = resolve(
  __dirname,
  '../../../../emulators/servicebus/conformance/Config.json',
);

export interface Namespace {
  connectionString: string;
  external: boolean;
  close(): Promise<void>;
}

export async function openNamespace(): Promise<Namespace> {
  const external = process.env.SERVICEBUS_CONFORMANCE_CONNECTION_STRING;
  if (external) return { connectionString: external, external: true, close: async () => {} };
  // Loaded lazily so that running against another endpoint never touches the emulator code.
  const { startServiceBusEmulator } = await import('../index.js');
  const emulator = await startServiceBusEmulator({ config: fixtureConfigPath, port: 0 });
  return { connectionString: emulator.connectionString, external: false, close: () => emulator.stop() };
}

export function newClient(ns: Namespace): ServiceBusClient {
  return new ServiceBusClient(ns.connectionString, { retryOptions: { maxRetries: 1, timeoutInMs: 20_000 } });
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
