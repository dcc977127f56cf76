import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { HttpRequest, InvocationContext, type HttpResponseInit } from '@azure/functions';
import { ServiceBusClient, type ServiceBusReceivedMessage } from '@azure/service-bus';
import { startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../../emulators/servicebus/index.js';
import type { Dependencies } from '../../shared/app/ports.js';
import {
  decide,
  makePolicy,
  ManualClock,
  orderWorkflowVersions,
  type Order,
  type OrderEvent,
  type Policy,
} from '../../shared/domain/index.js';
import { ServiceBusMessageBus } from '../../shared/messaging/bus.js';
import type {
  AgentReplyMessage,
  AgentRequestMessage,
  ProcessOrderMessage,
} from '../../shared/messaging/contracts.js';
import { StateStore, type StoredOrder } from '../../shared/stateStore/index.js';
import { orderBody, peekAll } from './helpers.js';
import { submitOrder } from '../../shared/http/orderApi.js';

/**
 * Direct handler tests: the real Scheduler / Supervisor / Agent functions called in process,
 * against Azurite and the in-process Service Bus emulator, with a ManualClock. Each test gets its
 * own tables (so one test's Supervisor sweep never sees another's orders) and its own clock; the
 * broker is shared by the file and messages are told apart by order id.
 */
export const repoRoot = join(__dirname, '..', '..', '..');

export interface Infra {
  azurite: AzuriteInstance;
  emulator: ServiceBusEmulator;
  bus: ServiceBusMessageBus;
  client: ServiceBusClient;
  stop(): Promise<void>;
}

export async function startInfra(): Promise<Infra> {
  const [azuriteStarted, emulatorStarted] = await Promise.allSettled([
    startAzurite({ services: ['table'] }),
    startServiceBusEmulator({
      config: join(repoRoot, 'infra', 'servicebus-emulator', 'Config.json'),
      port: 0,
    }),
  ]);
  if (azuriteStarted.status === 'rejected' || emulatorStarted.status === 'rejected') {
    // Stop whichever did start: a listening emulator left behind keeps the test file's process
    // alive, so a slow Azurite start turned into a hung run instead of a failed one.
    if (azuriteStarted.status === 'fulfilled') await azuriteStarted.value.stop().catch(() => undefined);
    if (emulatorStarted.status === 'fulfilled') await emulatorStarted.value.stop().catch(() => undefined);
    throw azuriteStarted.status === 'rejected'
      ? azuriteStarted.reason
      : (emulatorStarted as PromiseRejectedResult).reason;
  }
  const azurite = azuriteStarted.value;
  const emulator = emulatorStarted.value;
  const bus = ServiceBusMessageBus.fromConnection({
    kind: 'connectionString',
    connectionString: emulator.connectionString,
  });
  const client = new ServiceBusClient(emulator.connectionString);
  return {
    azurite,
    emulator,
    bus,
    client,
    async stop() {
      await bus.close().catch(() => undefined);
      await client.close().catch(() => undefined);
      await emulator.stop().catch(() => undefined);
      await azurite.stop();
    },
  };
}

export const testPolicy: Policy = makePolicy({
  stepTimeoutSeconds: 60,
  claimTimeoutSeconds: 30,
  failureSoftThreshold: 2,
  failureHardThreshold: 3,
  extendedBackoffSeconds: 30,
});

export interface TestDeps extends Dependencies {
  clock: ManualClock;
  store: StateStore;
}

/** Fresh tables and a clock that starts at real time (message TTLs are real on the broker). */
export async function freshDeps(infra: Infra): Promise<TestDeps> {
  const suffix = randomUUID().replace(/-/g, '').slice(0, 10);
  const store = await StateStore.open(
    { kind: 'connectionString', connectionString: infra.azurite.connectionString },
    { ordersTable: `Orders${suffix}`, inFlightTable: `InFlight${suffix}` },
  );
  return {
    store,
    bus: infra.bus,
    clock: new ManualClock(new Date()),
    policy: testPolicy,
    workflows: orderWorkflowVersions,
  };
}

export interface Captured {
  level: string;
  line: string;
}

/** An InvocationContext like the host's, whose log lines are kept for assertions. */
export function context(
  functionName: string,
  invocationId: string = randomUUID(),
  messageId?: string,
  logs: Captured[] = [],
): InvocationContext {
  return new InvocationContext({
    invocationId,
    functionName,
    triggerMetadata: messageId ? { messageId, deliveryCount: 1 } : {},
    logHandler: (level, ...args) => logs.push({ level, line: args.map(String).join(' ') }),
  });
}

export function newOrder(orderId: string = randomUUID(), skus: string[] = ['SKU-1']): Order {
  return {
    orderId,
    customerId: 'c-1',
    items: skus.map((sku) => ({ sku, quantity: 1, unitPrice: 5 })),
    shippingAddress: { name: 'A', line1: 'Main St 1', city: 'Berlin', postalCode: '10115', country: 'DE' },
    requestHash: 'h',
    createdAt: new Date(),
  };
}

/** A payment Agent's request for a new order, due `windowMs` from now (attempt 1, run 1). */
export function paymentRequest(windowMs = 4_000, skus: string[] = ['SKU-1']): AgentRequestMessage {
  const order = newOrder(randomUUID(), skus);
  return {
    type: 'agent-request',
    orderId: order.orderId,
    run: 1,
    step: 'payment',
    kind: 'do',
    action: 'charge',
    attempt: 1,
    completeBy: new Date(Date.now() + windowMs).toISOString(),
    idempotencyKey: `${order.orderId}:payment`,
    payload: {
      orderId: order.orderId,
      customerId: order.customerId,
      items: order.items,
      shippingAddress: order.shippingAddress,
    },
  };
}

/** POST /api/orders through the handler itself (no host): `body` under the Idempotency-Key `key`. */
export function postOrder(
  deps: Dependencies,
  key: string = randomUUID(),
  body: unknown = orderBody(),
): Promise<HttpResponseInit> {
  return submitOrder(
    deps,
    new HttpRequest({
      method: 'POST',
      url: 'http://127.0.0.1/api/orders',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: { string: JSON.stringify(body) },
    }),
    context('submitOrder'),
  );
}

/** Records a submitted order in the store, as submitOrder does (its messages are not sent). */
export async function submitted(deps: TestDeps, skus?: string[]): Promise<string> {
  const order = newOrder(undefined, skus);
  const d = decide(
    deps.workflows,
    null,
    { type: 'Submit', orderId: order.orderId },
    deps.clock.now(),
    deps.policy,
  );
  await deps.store.submit(order, d.state);
  return order.orderId;
}

/** Writes one transition with the store and sends nothing: a process that died after its write. */
export async function writeOnly(deps: TestDeps, orderId: string, event: OrderEvent): Promise<StoredOrder> {
  const { stored } = await deps.store.applyWithRetry(orderId, (current) =>
    decide(deps.workflows, current.state, event, deps.clock.now(), deps.policy),
  );
  return stored;
}

export async function load(deps: TestDeps, orderId: string): Promise<StoredOrder> {
  const loaded = await deps.store.load(orderId);
  if (!loaded) throw new Error(`no order ${orderId}`);
  return loaded;
}

export function processOrder(orderId: string, reason: ProcessOrderMessage['reason'] = 'submitted') {
  return { type: 'process-order', orderId, reason } satisfies ProcessOrderMessage;
}

export function reply(
  orderId: string,
  step: string,
  attempt: number,
  outcome: 'succeeded' | 'failed',
  kind: 'do' | 'compensate' = 'do',
  run = 1,
): AgentReplyMessage {
  const r: AgentReplyMessage = { type: 'agent-reply', orderId, run, step, kind, attempt, outcome };
  if (outcome === 'failed') r.error = { status: 422, message: 'refused' };
  return r;
}

/** Messages an entity holds for one order (peeked, scheduled included). */
export async function held(
  infra: Infra,
  entity: string,
  orderId: string,
): Promise<ServiceBusReceivedMessage[]> {
  return (await peekAll(infra.client, entity)).filter((m) => m.correlationId === orderId);
}
