import { randomUUID } from 'node:crypto';
import {
  ServiceBusClient,
  type ServiceBusReceivedMessage,
  type ServiceBusReceiver,
} from '@azure/service-bus';
import Long from 'long';
import type { Stack } from '../../local/stack.js';
import type { orderView } from '../../shared/orders/orderView.js';

/** Shared pieces of the app tests: order bodies, HTTP calls, polling, and broker observers. */

export interface Item {
  sku: string;
  quantity: number;
  unitPrice: number;
}

export function orderBody(skus: string[] = ['SKU-1'], customerId = 'c-1') {
  const items: Item[] = skus.map((sku) => ({ sku, quantity: 1, unitPrice: 10 }));
  return {
    customerId,
    items,
    shippingAddress: { name: 'Ada', line1: 'Main St 1', city: 'Berlin', postalCode: '10115', country: 'DE' },
  };
}

export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 60_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  contentType: string;
  body: ResponseBody;
}

/** GET /api/orders/{id} as JSON. */
export type OrderViewJson = ReturnType<typeof orderView>;

/** Any answer of the API: an accepted order, a view, or a problem. */
export interface ResponseBody extends Partial<OrderViewJson> {
  status?: number;
  title?: string;
  type?: string;
  statusUrl?: string;
  errors?: Array<{ pointer: string; detail: string }>;
  [extension: string]: unknown;
}

/**
 * A thin HTTP client for the stack's API; `key: null` sends no function key, `operator: true`
 * sends the operator credential instead of it (the operator routes refuse a function key).
 */
export class Api {
  constructor(private readonly stack: Stack) {}

  async call(
    method: string,
    path: string,
    options: {
      body?: unknown;
      raw?: string | Uint8Array;
      headers?: Record<string, string>;
      key?: string | null;
      operator?: boolean;
    } = {},
  ): Promise<ApiResponse> {
    const headers: Record<string, string> = { ...options.headers };
    const key = options.key === undefined ? (options.operator ? null : this.stack.functionKey) : options.key;
    if (key !== null) headers['x-functions-key'] = key;
    if (options.operator) headers.authorization = `Bearer ${this.stack.operatorKey}`;
    let body: string | Uint8Array | undefined = options.raw;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(`${this.stack.baseUrl}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: ResponseBody = { text };
    try {
      if (text) parsed = JSON.parse(text) as ResponseBody;
    } catch {
      /* not JSON: keep the text */
    }
    return {
      status: res.status,
      headers: res.headers,
      contentType: res.headers.get('content-type') ?? '',
      body: parsed,
    };
  }

  submit(body: unknown, idempotencyKey?: string): Promise<ApiResponse> {
    return this.call('POST', '/orders', {
      body,
      headers: idempotencyKey ? { 'idempotency-key': idempotencyKey } : {},
    });
  }

  get(orderId: string): Promise<ApiResponse> {
    return this.call('GET', `/orders/${orderId}`);
  }

  /** An operator route, with the operator credential. */
  operator(method: string, path: string): Promise<ApiResponse> {
    return this.call(method, path, { operator: true });
  }

  /** Submits and returns the new order's id (asserting the 202). */
  async place(skus: string[]): Promise<string> {
    const res = await this.submit(orderBody(skus), randomUUID());
    if (res.status !== 202) throw new Error(`submit answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body.orderId as string;
  }

  /** Polls GET until the order reaches one of `states`. */
  async until(orderId: string, states: string[], timeoutMs = 60_000): Promise<OrderViewJson> {
    let last: unknown;
    try {
      return await waitFor(
        `order ${orderId} to reach ${states.join('|')}`,
        async () => {
          const res = await this.get(orderId);
          last = res.body;
          return res.status === 200 && states.includes(res.body.processState ?? '')
            ? (res.body as OrderViewJson)
            : undefined;
        },
        timeoutMs,
        300,
      );
    } catch (e) {
      throw new Error(`${(e as Error).message}; last seen ${JSON.stringify(last)}`);
    }
  }
}

export const terminal = ['Processed', 'Compensated', 'Error'];

/**
 * Reads every message of one queue or subscription as it arrives (receive-and-delete) into a
 * list tests can filter by order; one per file, started in `before`.
 */
export class Collector {
  readonly messages: ServiceBusReceivedMessage[] = [];
  private readonly receiver: ServiceBusReceiver;
  private closed = false;

  constructor(client: ServiceBusClient, queueOrTopic: string, subscription?: string) {
    this.receiver = subscription
      ? client.createReceiver(queueOrTopic, subscription, { receiveMode: 'receiveAndDelete' })
      : client.createReceiver(queueOrTopic, { receiveMode: 'receiveAndDelete' });
    this.receiver.subscribe({
      processMessage: async (m) => {
        this.messages.push(m);
      },
      processError: async (args) => {
        if (!this.closed) console.error(`collector ${queueOrTopic}: ${args.error.message}`);
      },
    });
  }

  for(orderId: string): ServiceBusReceivedMessage[] {
    return this.messages.filter(
      (m) => m.correlationId === orderId || (m.body as { orderId?: string })?.orderId === orderId,
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.receiver.close();
  }
}

/** Every message currently held by an entity (scheduled ones included), without taking them. */
export async function peekAll(client: ServiceBusClient, queue: string): Promise<ServiceBusReceivedMessage[]> {
  const receiver = client.createReceiver(queue);
  try {
    return await receiver.peekMessages(1000, { fromSequenceNumber: Long.fromNumber(0) });
  } finally {
    await receiver.close();
  }
}

export function statusEvents(c: Collector, orderId: string): string[] {
  return c.for(orderId).map((m) => (m.body as { event: string }).event);
}
