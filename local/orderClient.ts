import type { ProcessState } from '../shared/domain/index.js';
import type { OrderRequest } from '../shared/orders/orderRequest.js';

/**
 * A small client of the order API over plain fetch, as any HTTP client would call it: the demo
 * and the end-to-end tests use it, so they exercise exactly what a user's curl does.
 */

export const terminalProcessStates: readonly ProcessState[] = ['Processed', 'Compensated', 'Error'];

/** The parts of GET /api/orders/{orderId} the demo and tests read. */
export interface OrderStatus {
  orderId: string;
  processState: ProcessState;
  failureCount: number;
  error: { code: string; detail: string | null } | null;
  createdAt: string;
  updatedAt: string;
  steps: Array<{ name: string; status: string; attempt: number; compensationAttempt: number }>;
}

export interface Submitted {
  status: number;
  orderId: string;
  statusUrl: string;
}

export class ApiError extends Error {
  constructor(
    public readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export interface OrderApiClient {
  baseUrl: string;
  submit(order: OrderRequest, idempotencyKey?: string): Promise<Submitted>;
  status(orderId: string): Promise<OrderStatus>;
  /** 'ok' when the API answers with this key, 'unauthorized' on 401, 'down' when nothing listens. */
  probe(timeoutMs?: number): Promise<'ok' | 'unauthorized' | 'down'>;
}

export function orderApiClient(baseUrl: string, functionKey: string): OrderApiClient {
  const base = baseUrl.replace(/\/+$/, '');
  const headers = { 'x-functions-key': functionKey };
  const fail = async (what: string, response: Response): Promise<never> => {
    const text = await response.text().catch(() => '');
    throw new ApiError(response.status, `${what}: HTTP ${response.status} ${text.slice(0, 300)}`);
  };
  return {
    baseUrl: base,
    async submit(order, idempotencyKey) {
      const response = await fetch(`${base}/orders`, {
        method: 'POST',
        headers: {
          ...headers,
          'content-type': 'application/json',
          ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
        },
        body: JSON.stringify(order),
      });
      if (response.status !== 202) return fail('submit', response);
      const body = (await response.json()) as { orderId: string; statusUrl: string };
      return { status: response.status, orderId: body.orderId, statusUrl: body.statusUrl };
    },
    async status(orderId) {
      const response = await fetch(`${base}/orders/${encodeURIComponent(orderId)}`, { headers });
      if (response.status !== 200) return fail(`status of ${orderId}`, response);
      return (await response.json()) as OrderStatus;
    },
    async probe(timeoutMs = 1500) {
      try {
        // A client route (any well-formed id: 404 means the key was accepted); the listing is an
        // operator route and refuses function keys.
        const response = await fetch(`${base}/orders/00000000-0000-4000-8000-000000000000`, {
          headers,
          signal: AbortSignal.timeout(timeoutMs),
        });
        await response.arrayBuffer();
        if (response.status === 401) return 'unauthorized';
        return response.ok || response.status === 404 ? 'ok' : 'down';
      } catch {
        return 'down';
      }
    },
  };
}

/** A valid order; extra SKUs (fault SKUs) are added as zero-priced lines. */
export function sampleOrder(customerId: string, extraSkus: readonly string[] = []): OrderRequest {
  return {
    customerId,
    items: [
      { sku: 'BOOK-1', quantity: 2, unitPrice: 12.5 },
      ...extraSkus.map((sku) => ({ sku, quantity: 1, unitPrice: 0 })),
    ],
    shippingAddress: {
      name: 'Ada Lovelace',
      line1: '12 Analytical Row',
      city: 'London',
      postalCode: 'N1 9GU',
      country: 'GB',
    },
  };
}

export interface WaitOptions {
  deadline: number;
  pollMs?: number;
  /** Called after each round of polling with the latest status of every order. */
  onRound?: (latest: ReadonlyMap<string, OrderStatus>) => void;
}

/**
 * Polls until every order is terminal or the deadline (epoch ms) passes; returns the last status
 * seen for each order. Transient poll errors (a restarting host) are retried until the deadline.
 */
export async function waitForTerminal(
  client: OrderApiClient,
  orderIds: readonly string[],
  options: WaitOptions,
): Promise<Map<string, OrderStatus>> {
  const latest = new Map<string, OrderStatus>();
  const pending = new Set(orderIds);
  for (;;) {
    await Promise.all(
      [...pending].map(async (id) => {
        try {
          const status = await client.status(id);
          latest.set(id, status);
          if (terminalProcessStates.includes(status.processState)) pending.delete(id);
        } catch {
          // The host may be restarting; the next round asks again.
        }
      }),
    );
    options.onRound?.(latest);
    if (pending.size === 0 || Date.now() >= options.deadline) return latest;
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 250));
  }
}
