import { createServer, type AddressInfo } from 'node:net';
import { ServiceBusClient, type ServiceBusReceiver } from '@azure/service-bus';
import { localOrderAccounts, startStack, type Stack } from '../local/stack.js';
import { devAccountKey, devAccountName } from '../local/azurite.js';
import { connectionStringFor } from '../emulators/servicebus/index.js';
import { startAmqpProxy, type AmqpProxy } from './amqpProxy.js';
import { startTableProxy, type TableProxy } from './tableProxy.js';
import type { Counts } from './stats.js';
import type { NamespaceCredits } from './serviceBusCredits.js';
import type { TableThrottle } from './tableThrottle.js';

/**
 * The local stack with counting proxies between the app and its servers: the functions host (a
 * child process, the real app) reaches Azurite's table endpoint and the Service Bus emulator only
 * through them. The bench's own observers (the status feed, seeding) connect directly, so they
 * are not counted as app cost.
 */
export const statusFeed = { topic: 'order-status', subscription: 'all' } as const;
export const statusFeedPath = `${statusFeed.topic}/Subscriptions/${statusFeed.subscription}`.toLowerCase();
export const terminalStates = new Set(['Processed', 'Compensated', 'Error']);

export interface BenchStack {
  stack: Stack;
  tableProxy: TableProxy;
  amqpProxy: AmqpProxy;
  /** Connection strings that go through the proxies (what the app uses). */
  countedTables: string;
  /** Every account's table connection string through the table proxy, countedTables first. */
  countedAccounts: string[];
  countedServiceBus: string;
  /** Table and Service Bus counters as one flat map (see counters()). */
  counters(): Counts;
  status: StatusFeed;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** What the throttled simulation enforces (bench/simulation.ts); the other benches only count. */
export interface BenchLimits {
  tableThrottle?: TableThrottle;
  serviceBusCredits?: NamespaceCredits;
  /** Storage accounts orders are spread over (StateStoreAccounts), all through the table proxy. */
  storageAccounts?: number;
}

export async function startBenchStack(
  settings: Record<string, string>,
  log?: (line: string) => void,
  limits: BenchLimits = {},
): Promise<BenchStack> {
  const tableProxy = await startTableProxy({ throttle: limits.tableThrottle });
  const amqpProxy = await startAmqpProxy();
  // Fixed ports so the proxies know their upstreams before the host starts connecting.
  const [tablePort, busPort, blobPort] = [await freePort(), await freePort(), await freePort()];
  tableProxy.setUpstream(`http://127.0.0.1:${tablePort}`);
  amqpProxy.setUpstream(busPort);
  // Azurite is path-style: the proxy tells the accounts apart by the first path segment. The blob
  // endpoint (the retention's order archive, not counted) goes to Azurite directly.
  const counted = (account: string) =>
    `DefaultEndpointsProtocol=http;AccountName=${account};AccountKey=${devAccountKey};` +
    `BlobEndpoint=http://127.0.0.1:${blobPort}/${account};` +
    `TableEndpoint=http://127.0.0.1:${tableProxy.port}/${account};`;
  const accounts = limits.storageAccounts ?? 1;
  const countedAccounts = [devAccountName, ...localOrderAccounts(accounts)].map(counted);
  const countedTables = countedAccounts[0];
  const countedServiceBus = connectionStringFor('127.0.0.1', amqpProxy.port);
  const recent: string[] = [];
  const stack = await startStack({
    ports: {
      http: 0,
      serviceBus: busPort,
      blob: blobPort,
      queue: 0,
      table: tablePort,
      inventory: 0,
      payment: 0,
      shipping: 0,
    },
    settings: {
      ...settings,
      StateStoreConnection: countedTables,
      ServiceBusConnection: countedServiceBus,
      ...(accounts > 1 ? { StateStoreAccounts: countedAccounts.join(',') } : {}),
    },
    storageAccounts: accounts,
    serviceBusRefuseSend: limits.serviceBusCredits?.refuseSend,
    log: (line) => {
      recent.push(line);
      if (recent.length > 200) recent.shift();
      log?.(line);
    },
  });
  limits.serviceBusCredits?.attach(() => stack.serviceBus.counters());
  const status = await StatusFeed.start(stack.serviceBus.connectionString);
  const counters = (): Counts => {
    const out: Counts = {};
    for (const [k, v] of Object.entries(tableProxy.snapshot())) out[`table.${k}`] = v;
    for (const [k, v] of Object.entries(amqpProxy.snapshot())) out[`amqp.${k}`] = v;
    const sb = stack.serviceBus.counters();
    for (const e of sb.entities) {
      // The bench's own status-feed reader is a client, not the app.
      const feed = e.path.toLowerCase() === statusFeedPath;
      const prefix = feed ? 'feed' : 'sb';
      out[`${prefix}.delivered`] = (out[`${prefix}.delivered`] ?? 0) + e.delivered;
      out[`${prefix}.completed`] = (out[`${prefix}.completed`] ?? 0) + e.completed;
      out[`${prefix}.abandoned`] = (out[`${prefix}.abandoned`] ?? 0) + e.abandoned;
      out[`${prefix}.deadLettered`] = (out[`${prefix}.deadLettered`] ?? 0) + e.deadLettered;
      if (!feed) {
        out[`sb.delivered.${e.path}`] = e.delivered;
        out[`sb.settled.${e.path}`] = e.completed + e.abandoned + e.deadLettered;
      }
    }
    for (const s of sb.senders) {
      out['sb.sent'] = (out['sb.sent'] ?? 0) + s.sent;
      out['sb.duplicates'] = (out['sb.duplicates'] ?? 0) + s.duplicates;
      out[`sb.sent.${s.path}`] = s.sent;
    }
    return out;
  };
  return {
    stack,
    tableProxy,
    amqpProxy,
    countedTables,
    countedAccounts,
    countedServiceBus,
    counters,
    status,
    stop: async () => {
      await status.close();
      await stack.stop();
      await tableProxy.close();
      await amqpProxy.close();
    },
  };
}

/**
 * Follows the order-status topic (what a client app would do instead of polling): records when
 * each order reached a terminal state. Polling GET /orders/{id} would itself cost table reads.
 */
export class StatusFeed {
  private readonly terminal = new Map<string, { at: number; wall: number; state: string }>();
  private readonly waiters = new Map<
    string,
    Array<(v: { at: number; wall: number; state: string }) => void>
  >();

  private constructor(
    private readonly client: ServiceBusClient,
    private readonly receiver: ServiceBusReceiver,
  ) {}

  static async start(connectionString: string): Promise<StatusFeed> {
    const client = new ServiceBusClient(connectionString);
    const receiver = client.createReceiver(statusFeed.topic, statusFeed.subscription, {
      receiveMode: 'receiveAndDelete',
    });
    const feed = new StatusFeed(client, receiver);
    receiver.subscribe(
      {
        processMessage: async (m) => {
          const body = m.body as { orderId?: string; processState?: string };
          if (body?.orderId && body.processState && terminalStates.has(body.processState)) {
            feed.record(body.orderId, body.processState);
          }
        },
        processError: async () => undefined,
      },
      { maxConcurrentCalls: 16 },
    );
    return feed;
  }

  private record(orderId: string, state: string): void {
    if (this.terminal.has(orderId)) return;
    const v = { at: performance.now(), wall: Date.now(), state };
    this.terminal.set(orderId, v);
    for (const w of this.waiters.get(orderId) ?? []) w(v);
    this.waiters.delete(orderId);
  }

  /** Resolves with the terminal state and the performance.now() it was seen at. */
  waitFor(orderId: string, timeoutMs: number): Promise<{ at: number; wall: number; state: string }> {
    const seen = this.terminal.get(orderId);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`order ${orderId} not terminal within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const list = this.waiters.get(orderId) ?? [];
      list.push((v) => {
        clearTimeout(timer);
        resolve(v);
      });
      this.waiters.set(orderId, list);
    });
  }

  async close(): Promise<void> {
    await this.receiver.close();
    await this.client.close();
  }
}

export interface OrderItem {
  sku: string;
  quantity: number;
  unitPrice: number;
}

export function orderBody(items: OrderItem[] = [{ sku: 'SKU-1', quantity: 1, unitPrice: 9.99 }]) {
  return {
    customerId: 'bench-customer',
    items,
    shippingAddress: {
      name: 'Bench',
      line1: '1 Main St',
      city: 'Berlin',
      postalCode: '10115',
      country: 'DE',
    },
  };
}

/** POST /orders; returns the order id and the performance.now() the request was sent at. */
export async function submitOrder(
  stack: Stack,
  items?: OrderItem[],
): Promise<{ orderId: string; sentAt: number }> {
  const sentAt = performance.now();
  const res = await fetch(`${stack.baseUrl}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-functions-key': stack.functionKey },
    body: JSON.stringify(orderBody(items)),
  });
  const text = await res.text();
  if (res.status !== 202) throw new Error(`submit: HTTP ${res.status} ${text}`);
  return { orderId: (JSON.parse(text) as { orderId: string }).orderId, sentAt };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
