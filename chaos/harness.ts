import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomUUID } from 'node:crypto';
import { ServiceBusClient } from '@azure/service-bus';
import { startStack, type Stack } from '../local/stack.js';
import { startAzurite, type AzuriteInstance } from '../local/azurite.js';
import { spawnLocalHost, type SpawnedLocalHost } from '../local/host/index.js';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../emulators/servicebus/index.js';
import {
  decide,
  isTerminal,
  makePolicy,
  orderIdFromIdempotencyKey,
  orderWorkflow,
  type Order,
  type OrderState,
} from '../shared/domain/index.js';
import { StateStore } from '../shared/stateStore/index.js';
import { queues, topics, waitingQueues } from '../shared/messaging/entities.js';
import type { LedgerSnapshot } from '../local/remoteServices/index.js';
import { startTcpProxy, type TcpProxy } from './tcpProxy.js';

/**
 * What a chaos scenario works with: the local stack (the host a child process, Azurite a child
 * process, the emulator and the demo services in this process), a state store client of its own
 * to read the truth, and the bookkeeping of what it submitted and when.
 */
export const repoRoot = resolve(__dirname, '..', '..');

/** The app settings every scenario runs with (short, so a quick run stays quick). */
export const chaosSettings = {
  STEP_TIMEOUT_SECONDS: '3',
  CLAIM_TIMEOUT_SECONDS: '3',
  SUPERVISOR_SCHEDULE: '*/1 * * * * *',
  FAILURE_SOFT_THRESHOLD: '2',
  FAILURE_HARD_THRESHOLD: '4',
  EXTENDED_BACKOFF_SECONDS: '2',
  // The door stays open: each scenario checks the invariants on the orders it sends, and a door
  // refusing them would shrink what is tested. `burst` opens it (test/app/admission.test.ts too).
  ADMISSION_BACKLOG_LIMIT_SECONDS: '0',
};

export interface Bound {
  seconds: number;
  formula: string;
}

/**
 * Invariant 1's bound, from the configuration. Forward: at most `hard` timeouts in a run (each
 * noticed within a sweep, those from the soft threshold on after the extended back-off) plus the
 * steps that succeed (each within a step timeout). Then, if the order gives up, compensation: each
 * step's undo has the same thresholds of its own (`compensationAttempt`), so up to `steps` undos
 * of up to `hard` timeouts each. Outages a scenario causes on purpose are added on top.
 */
export function lostOrderBound(settings: Record<string, string>, steps: number, outageSeconds = 0): Bound {
  const timeout = Number(settings.STEP_TIMEOUT_SECONDS);
  const soft = Number(settings.FAILURE_SOFT_THRESHOLD);
  const hard = Number(settings.FAILURE_HARD_THRESHOLD);
  const backoff = Number(settings.EXTENDED_BACKOFF_SECONDS);
  const sweep = 1; // SUPERVISOR_SCHEDULE every second
  const margin = 15; // host start-up, a loaded 2-core machine
  const retries = hard * (timeout + sweep) + (hard - soft) * backoff;
  const forward = retries + steps * timeout;
  const compensation = steps * retries;
  const seconds = forward + compensation + sweep + margin + outageSeconds;
  return {
    seconds,
    formula:
      `forward [hard ${hard} x (step timeout ${timeout}s + sweep ${sweep}s) + (hard - soft ${soft}) x back-off ${backoff}s` +
      ` + steps ${steps} x ${timeout}s = ${forward}s] + compensation [steps ${steps} x ${retries}s = ${compensation}s]` +
      ` + sweep ${sweep}s + margin ${margin}s` +
      (outageSeconds ? ` + outage ${outageSeconds}s` : '') +
      ` = ${seconds}s`,
  };
}

export interface Submitted {
  orderId: string;
  at: number;
  /** Written through the store without any message (a simulated crash after the write). */
  viaStore: boolean;
  skus: string[];
}

export interface ChaosContext {
  stack: Stack;
  /** The function app the hosts run (this repo, or a scenario's own app root). */
  appRoot: string;
  store: StateStore;
  dataDir?: string;
  submitted: Map<string, Submitted>;
  /** Order ids of every POST sent (acknowledged or not): anything else in the table is a phantom. */
  attempted: Set<string>;
  /** POSTs that got no 202 (host down, 503): not acknowledged, so not owed a terminal state. */
  refused: number;
  /**
   * Orders a scenario placed as history (written through the store long finished, e.g. for the
   * retention purge): not sent through the API, so neither owed a terminal state nor phantoms.
   */
  seeded: Set<string>;
  /** 503s with Retry-After from the submission door (each retried after the wait it asked for). */
  doorRefusals: number;
  extraHosts: SpawnedLocalHost[];
  /** The emulator / Azurite currently running (they change when a scenario restarts them). */
  serviceBus: ServiceBusEmulator;
  azurite: AzuriteInstance;
  proxy?: TcpProxy;
  /** The remote services are never restarted, so their ledgers hold the whole run. */
  ledgers(): Record<'inventory' | 'payment' | 'shipping', LedgerSnapshot>;
  log: (line: string) => void;
  /** Lines from every part of the stack (only with `captureLog`), e.g. the host's settlement warnings. */
  onLog(listener: (line: string) => void): void;
}

export interface ContextOptions {
  persistent?: boolean;
  settings?: Record<string, string>;
  verbose?: boolean;
  /** Another app root (package.json, host.json, Config.json); default this repo. */
  appRoot?: string;
  /** Pass the stack's lines to `onLog` listeners even when not verbose. */
  captureLog?: boolean;
}

export async function openContext(options: ContextOptions = {}): Promise<ChaosContext> {
  const dataDir = options.persistent ? mkdtempSync(join(tmpdir(), 'chaos-')) : undefined;
  const lines: string[] = [];
  const listeners: Array<(line: string) => void> = [];
  const log = (line: string): void => {
    if (options.verbose) process.stderr.write(`${line}\n`);
    lines.push(line);
    if (lines.length > 2000) lines.shift();
    for (const listener of listeners) listener(line);
  };
  const appRoot = options.appRoot ?? repoRoot;
  const stack = await startStack({
    ports: { http: 0, serviceBus: 0, blob: 0, queue: 0, table: 0, inventory: 0, payment: 0, shipping: 0 },
    settings: { ...chaosSettings, ...options.settings },
    appRoot,
    log: options.verbose || options.captureLog ? log : undefined,
  });
  // Not startStack's dataDir: the emulator stays in memory (Microsoft's behaviour) unless a
  // scenario swaps in a persisted one itself. Only Azurite needs a folder (to be restarted with its tables), so the
  // in-memory Azurite is swapped for one on a data folder, same ports, before any order exists.
  let azurite = stack.azurite;
  if (dataDir) {
    const ports = {
      blob: portOf(azurite.blobUrl!),
      queue: portOf(azurite.queueUrl!),
      table: portOf(azurite.tableUrl),
    };
    await azurite.stop();
    mkdirSync(join(dataDir, 'azurite'), { recursive: true });
    azurite = await startAzurite({
      services: ['blob', 'queue', 'table'],
      location: join(dataDir, 'azurite'),
      ports,
    });
  }
  const store = await StateStore.open({
    kind: 'connectionString',
    connectionString: stack.env.StateStoreConnection,
  });
  return {
    stack,
    appRoot,
    store,
    dataDir,
    submitted: new Map(),
    attempted: new Set(),
    seeded: new Set(),
    refused: 0,
    doorRefusals: 0,
    extraHosts: [],
    serviceBus: stack.serviceBus,
    azurite,
    ledgers: () => ({
      inventory: stack.remote.inventory.ledger(),
      payment: stack.remote.payment.ledger(),
      shipping: stack.remote.shipping.ledger(),
    }),
    log,
    onLog: (listener) => {
      listeners.push(listener);
    },
  };
}

export async function closeContext(ctx: ChaosContext): Promise<void> {
  for (const h of ctx.extraHosts) await h.kill('SIGKILL').catch(() => undefined);
  await ctx.stack.killHost('SIGKILL').catch(() => undefined);
  await ctx.proxy?.close().catch(() => undefined);
  if (ctx.serviceBus !== ctx.stack.serviceBus) await ctx.serviceBus.stop().catch(() => undefined);
  if (ctx.azurite !== ctx.stack.azurite) await ctx.azurite.stop().catch(() => undefined);
  await ctx.stack.stop();
  if (ctx.dataDir) rmSync(ctx.dataDir, { recursive: true, force: true });
}

export const address = {
  name: 'Chaos Tester',
  line1: 'Main St 1',
  city: 'Berlin',
  postalCode: '10115',
  country: 'DE',
};

export function orderBody(skus: string[]): Record<string, unknown> {
  return {
    customerId: 'chaos-customer',
    items: [
      { sku: 'SKU-1', quantity: 1, unitPrice: 10 },
      ...skus.map((sku) => ({ sku, quantity: 1, unitPrice: 0 })),
    ],
    shippingAddress: address,
  };
}

/** How long the careful client below keeps retrying one order's POST. */
export const submitPatienceMs = 60_000;

/**
 * POSTs one order like a careful client: one Idempotency-Key, retried on a network error or a
 * 5xx (the host may be down, or refuse at the door with 503) for up to a minute, so a submission
 * that was written but not answered is found again. A fixed count of tries made the client give
 * up while a SIGKILLed host was still restarting on a loaded machine (8 stored orders reported
 * unacknowledged in a quick run at load 12), which measures the machine, not the app.
 * Recorded as acknowledged only after a 202.
 */
export async function submitOrder(
  ctx: ChaosContext,
  skus: string[],
  baseUrl?: string,
): Promise<string | undefined> {
  const key = randomUUID();
  ctx.attempted.add(orderIdFromIdempotencyKey(key));
  const giveUpAt = Date.now() + submitPatienceMs;
  while (Date.now() < giveUpAt) {
    const base = baseUrl ?? ctx.stack.host()?.baseUrl ?? ctx.stack.baseUrl;
    try {
      const res = await fetch(`${base}/orders`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-functions-key': ctx.stack.env.FUNCTIONS_LOCAL_KEY ?? ctx.stack.functionKey,
          'idempotency-key': key,
        },
        body: JSON.stringify(orderBody(skus)),
        signal: AbortSignal.timeout(15_000),
      });
      const body = (await res.json().catch(() => ({}))) as { orderId?: string };
      if (res.status === 202 && typeof body.orderId === 'string') {
        ctx.submitted.set(body.orderId, { orderId: body.orderId, at: Date.now(), viaStore: false, skus });
        return body.orderId;
      }
      if (res.status < 500) break;
      // The door's 503 says when to come back; honour it within the patience left.
      const retryAfter = Number(res.headers.get('retry-after'));
      if (res.status === 503 && Number.isFinite(retryAfter) && retryAfter > 0) {
        ctx.doorRefusals += 1;
        await sleep(Math.min(retryAfter * 1000, Math.max(0, giveUpAt - Date.now())));
        continue;
      }
    } catch {
      // host down or connection reset: retry with the same key
    }
    await sleep(1000);
  }
  ctx.refused += 1;
  return undefined;
}

/**
 * A submission whose process died after the transaction and before its process-order message:
 * the same decide + StateStore.submit the API runs, and then nothing. Only the Supervisor can
 * notice it (the claim complete-by passes).
 */
export async function submitWithoutMessage(ctx: ChaosContext, skus: string[]): Promise<string> {
  const orderId = randomUUID();
  const now = new Date();
  const policy = chaosPolicy();
  const body = orderBody(skus) as Pick<Order, 'customerId' | 'items' | 'shippingAddress'>;
  const order: Order = { orderId, ...body, requestHash: 'chaos-direct', createdAt: now };
  const decision = decide(orderWorkflow, null, { type: 'Submit', orderId }, now, policy);
  await ctx.store.submit(order, decision.state);
  ctx.attempted.add(orderId);
  ctx.submitted.set(orderId, { orderId, at: now.getTime(), viaStore: true, skus });
  return orderId;
}

/**
 * A submission that stalls between its two writes (the in-flight index put, then the order's
 * transaction) for `stallMs`, long enough for sweeps to run in between, and then dies before its
 * process-order message: the real StateStore.submit on a store whose index put is followed by the
 * stall. Only the Supervisor can find the order, and only through its index row.
 */
export async function submitStalled(ctx: ChaosContext, skus: string[], stallMs: number): Promise<string> {
  const store = await StateStore.open({
    kind: 'connectionString',
    connectionString: ctx.stack.env.StateStoreConnection,
  });
  const put = store.index.put.bind(store.index);
  store.index.put = async (orderId, checkAfter) => {
    const etag = await put(orderId, checkAfter);
    await sleep(stallMs);
    return etag;
  };
  const orderId = randomUUID();
  ctx.attempted.add(orderId);
  const now = new Date();
  const body = orderBody(skus) as Pick<Order, 'customerId' | 'items' | 'shippingAddress'>;
  const order: Order = { orderId, ...body, requestHash: 'chaos-stalled', createdAt: now };
  const decision = decide(orderWorkflow, null, { type: 'Submit', orderId }, now, chaosPolicy());
  await store.submit(order, decision.state);
  ctx.submitted.set(orderId, { orderId, at: Date.now(), viaStore: true, skus });
  return orderId;
}

function chaosPolicy() {
  return makePolicy({
    stepTimeoutSeconds: Number(chaosSettings.STEP_TIMEOUT_SECONDS),
    claimTimeoutSeconds: Number(chaosSettings.CLAIM_TIMEOUT_SECONDS),
    failureSoftThreshold: Number(chaosSettings.FAILURE_SOFT_THRESHOLD),
    failureHardThreshold: Number(chaosSettings.FAILURE_HARD_THRESHOLD),
    extendedBackoffSeconds: Number(chaosSettings.EXTENDED_BACKOFF_SECONDS),
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Loads every submitted order until all are terminal or the deadline passes. */
export async function drain(
  ctx: ChaosContext,
  deadlineMs: number,
  observe?: (s: OrderState) => void,
): Promise<Map<string, OrderState>> {
  const finals = new Map<string, OrderState>();
  const open = new Set(ctx.submitted.keys());
  for (;;) {
    for (const orderId of [...open]) {
      try {
        const loaded = await ctx.store.load(orderId);
        if (!loaded) continue;
        observe?.(loaded.state);
        finals.set(orderId, loaded.state);
        if (isTerminal(loaded.state.processState)) open.delete(orderId);
      } catch {
        // Azurite may be restarting: try again next round.
      }
    }
    if (open.size === 0 || Date.now() > deadlineMs) return finals;
    await sleep(500);
  }
}

/** Every partition of the Orders table (each is one order). */
export async function listAllOrderIds(ctx: ChaosContext): Promise<Set<string>> {
  const ids = new Set<string>();
  for await (const row of ctx.store.orders.listEntities({
    queryOptions: { select: ['PartitionKey', 'RowKey'] },
  })) {
    ids.add(String(row.partitionKey));
  }
  return ids;
}

export interface PeekedMessage {
  entity: string;
  messageId?: string;
  orderId?: string;
  body: unknown;
  deadLetterReason?: string;
}

function orderIdOf(body: unknown, correlationId: unknown): string | undefined {
  if (body && typeof body === 'object' && typeof (body as { orderId?: unknown }).orderId === 'string') {
    return (body as { orderId: string }).orderId;
  }
  if (typeof body === 'string') {
    try {
      return orderIdOf(JSON.parse(body), correlationId);
    } catch {
      // not JSON: fall back to the correlation id
    }
  }
  return typeof correlationId === 'string' ? correlationId : undefined;
}

/** Peeks (never receives) every message of the dead-letter queues, and the operator alerts. */
export async function readQueues(
  ctx: ChaosContext,
): Promise<{ deadLetters: PeekedMessage[]; alerts: PeekedMessage[] }> {
  const client = new ServiceBusClient(ctx.serviceBus.connectionString);
  const peekAll = async (receiver: ReturnType<ServiceBusClient['createReceiver']>, entity: string) => {
    const out: PeekedMessage[] = [];
    let from: Long | undefined;
    for (let round = 0; round < 50; round++) {
      const batch = await receiver.peekMessages(250, from === undefined ? {} : { fromSequenceNumber: from });
      if (batch.length === 0) break;
      for (const m of batch) {
        out.push({
          entity,
          messageId: m.messageId === undefined ? undefined : String(m.messageId),
          orderId: orderIdOf(m.body, m.correlationId),
          body: m.body,
          deadLetterReason: m.deadLetterReason,
        });
      }
      const last = batch[batch.length - 1].sequenceNumber;
      if (!last) break;
      from = last.add(1);
    }
    await receiver.close();
    return out;
  };
  try {
    const deadLetters: PeekedMessage[] = [];
    // The Agents' waiting queues too: a waiting request can be dead-lettered there.
    for (const q of [...Object.values(queues), ...waitingQueues]) {
      deadLetters.push(
        ...(await peekAll(client.createReceiver(q, { subQueueType: 'deadLetter' }), `${q}/$DLQ`)),
      );
    }
    deadLetters.push(
      ...(await peekAll(
        client.createReceiver(topics.orderStatus, 'all', { subQueueType: 'deadLetter' }),
        `${topics.orderStatus}/all/$DLQ`,
      )),
    );
    const alerts = await peekAll(client.createReceiver(queues.operatorAlerts), queues.operatorAlerts);
    return { deadLetters, alerts };
  } finally {
    await client.close();
  }
}

type Long = NonNullable<
  Awaited<
    ReturnType<ReturnType<ServiceBusClient['createReceiver']>['peekMessages']>
  >[number]['sequenceNumber']
>;

/** Kills the stack's host with SIGKILL and starts it again on the same port. */
export async function crashHost(ctx: ChaosContext, downMs = 300): Promise<void> {
  await ctx.stack.killHost('SIGKILL');
  await sleep(downMs);
  await ctx.stack.startHost();
}

export async function addHost(
  ctx: ChaosContext,
  env: Record<string, string> = {},
  appRoot: string = ctx.appRoot,
): Promise<SpawnedLocalHost> {
  const host = await spawnLocalHost({ appRoot, env: { ...ctx.stack.env, ...env }, httpPort: 0 });
  ctx.extraHosts.push(host);
  return host;
}

function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** Stops Azurite and starts it again on the same ports with the same data folder. */
export async function restartAzurite(ctx: ChaosContext, downMs: number): Promise<void> {
  if (!ctx.dataDir) throw new Error('restarting Azurite needs a data folder (persistent context)');
  const ports = {
    blob: portOf(ctx.azurite.blobUrl!),
    queue: portOf(ctx.azurite.queueUrl!),
    table: portOf(ctx.azurite.tableUrl),
  };
  await ctx.azurite.stop();
  await sleep(downMs);
  ctx.azurite = await startAzurite({
    services: ['blob', 'queue', 'table'],
    location: join(ctx.dataDir, 'azurite'),
    ports,
  });
}

/** Stops the Service Bus emulator and starts a fresh one, without its data: every message is lost. */
export async function restartServiceBusEmpty(ctx: ChaosContext, downMs: number): Promise<void> {
  const port = ctx.serviceBus.port;
  await ctx.serviceBus.stop();
  await sleep(downMs);
  ctx.serviceBus = await startServiceBusEmulator({
    config: join(ctx.appRoot, 'infra', 'servicebus-emulator', 'Config.json'),
    port,
  });
}

/**
 * Puts a TCP proxy between the host and Azurite's table endpoint (the host is restarted to pick
 * up the new StateStoreConnection; the chaos runner's own store keeps talking to Azurite directly).
 */
export async function proxyTables(ctx: ChaosContext): Promise<TcpProxy> {
  const table = new URL(ctx.azurite.tableUrl);
  const proxy = await startTcpProxy({ host: table.hostname, port: Number(table.port) });
  ctx.proxy = proxy;
  const proxied = ctx.azurite.connectionString.replace(
    /TableEndpoint=http:\/\/[^/;]+/,
    `TableEndpoint=http://127.0.0.1:${proxy.port}`,
  );
  ctx.stack.env.StateStoreConnection = proxied;
  await ctx.stack.killHost('SIGTERM');
  await ctx.stack.startHost();
  return proxy;
}

/** A Service Bus emulator running as its own process (so it can be SIGKILLed), on a data folder. */
export interface ServiceBusProcess extends ServiceBusEmulator {
  /** Its `--verbose` lines so far (e.g. `persistence: 12 messages restored from ...`). */
  lines: string[];
  kill(signal: NodeJS.Signals): Promise<void>;
}

const emulatorCli = resolve(__dirname, '..', 'emulators', 'servicebus', 'cli.js');

/**
 * Starts `cli.js [--data <dataDir>] --port <port>` and resolves once it listens; `env` reaches the
 * child (broker-clock-ahead shifts its clock with the clockSkew.js preload).
 */
export async function spawnServiceBusEmulator(
  ctx: ChaosContext,
  port: number,
  dataDir: string | undefined,
  env: Record<string, string> = {},
): Promise<ServiceBusProcess> {
  const config = join(ctx.appRoot, 'infra', 'servicebus-emulator', 'Config.json');
  const child = spawn(
    process.execPath,
    [
      emulatorCli,
      '--config',
      config,
      '--port',
      String(port),
      ...(dataDir === undefined ? [] : ['--data', dataDir]),
      '--verbose',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
  );
  const lines: string[] = [];
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  let out = '';
  const listening = new Promise<string>((resolvePromise, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /ConnectionString=(\S+)/.exec(out);
      if (m) resolvePromise(m[1]);
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`the emulator exited before listening (${code ?? signal}): ${lines.join(' | ')}`)),
    );
  });
  let buffered = '';
  child.stderr!.on('data', (c: Buffer) => {
    buffered += c.toString();
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    for (const l of parts) {
      lines.push(l);
      ctx.log(l);
    }
  });
  const connectionString = await listening;
  const kill = async (signal: NodeJS.Signals): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  return {
    port,
    connectionString,
    lines,
    kill,
    stop: () => kill('SIGTERM'),
    counters: () => {
      throw new Error('counters() is not available for an emulator in another process');
    },
  };
}

/**
 * Swaps the stack's in-memory emulator for one in its own process with persistence, same port,
 * before any order exists. Returns its data folder.
 */
export async function runServiceBusWithPersistence(ctx: ChaosContext): Promise<string> {
  if (!ctx.dataDir) throw new Error('a persisted emulator needs a data folder (persistent context)');
  const dataDir = join(ctx.dataDir, 'servicebus');
  const port = ctx.serviceBus.port;
  await ctx.serviceBus.stop();
  ctx.serviceBus = await spawnServiceBusEmulator(ctx, port, dataDir);
  return dataDir;
}

/**
 * Swaps the stack's in-memory emulator for one in its own process whose wall clock runs `skewMs`
 * ahead of every host (the clockSkew.js preload), same port, before any order exists; the host is
 * recycled so it starts with links to the new broker.
 */
export async function runServiceBusWithClockSkew(ctx: ChaosContext, skewMs: number): Promise<void> {
  const port = ctx.serviceBus.port;
  await ctx.serviceBus.stop();
  ctx.serviceBus = await spawnServiceBusEmulator(ctx, port, undefined, {
    NODE_OPTIONS: `--require ${require.resolve('./clockSkew.js')}`,
    CHAOS_CLOCK_SKEW_MS: String(skewMs),
  });
  await ctx.stack.killHost('SIGTERM');
  await ctx.stack.startHost();
  // Let the new host's receivers attach before orders arrive: the clocks are under test, not a cold start.
  await sleep(2000);
}

/**
 * SIGKILLs the persisted emulator (no clean stop, no final write) and starts it again on its data
 * folder and port. Returns how many messages it says it restored.
 */
export async function crashServiceBusKeepingData(
  ctx: ChaosContext,
  dataDir: string,
  downMs: number,
): Promise<number> {
  const running = ctx.serviceBus as ServiceBusProcess;
  if (typeof running.kill !== 'function') throw new Error('runServiceBusWithPersistence first');
  await running.kill('SIGKILL');
  await sleep(downMs);
  const restarted = await spawnServiceBusEmulator(ctx, running.port, dataDir);
  ctx.serviceBus = restarted;
  // stderr and stdout are separate pipes: the restore line may arrive just after "listening".
  const restoredLine = () => restarted.lines.find((l) => /persistence: \d+ messages restored/.test(l));
  for (let waited = 0; !restoredLine() && waited < 5_000; waited += 50) await sleep(50);
  const line = restoredLine();
  if (!line)
    throw new Error(`the restarted emulator did not report its restore: ${restarted.lines.join(' | ')}`);
  return Number(/persistence: (\d+) messages restored/.exec(line)![1]);
}
