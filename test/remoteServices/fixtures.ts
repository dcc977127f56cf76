/** Order bodies and a bare HTTP helper shared by the remote-service and Agent client tests. */

export interface OrderBody {
  orderId: string;
  customerId: string;
  items: { sku: string; quantity: number; unitPrice: number }[];
  shippingAddress: { name: string; line1: string; city: string; postalCode: string; country: string };
  originalIdempotencyKey?: string;
}

let counter = 0;

/** A fresh order id per call, so tests sharing a service never share keys by accident. */
export function newOrderId(prefix = 'order'): string {
  counter++;
  return `${prefix}-${process.pid}-${counter}`;
}

export function order(orderId: string, extraSkus: string[] = []): OrderBody {
  return {
    orderId,
    customerId: 'customer-1',
    items: [
      { sku: 'BOOK-1', quantity: 2, unitPrice: 12.5 },
      ...extraSkus.map((sku) => ({ sku, quantity: 1, unitPrice: 0 })),
    ],
    shippingAddress: {
      name: 'Ada Lovelace',
      line1: '1 Main St',
      city: 'Springfield',
      postalCode: '12345',
      country: 'US',
    },
  };
}

export interface Posted {
  status: number;
  contentType: string | null;
  retryAfter: string | null;
  body: unknown;
}

export async function post(
  baseUrl: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Posted> {
  const response = await fetch(`${baseUrl}/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return {
    status: response.status,
    contentType: response.headers.get('content-type'),
    retryAfter: response.headers.get('retry-after'),
    body: parsed,
  };
}

/** Polls until `check` returns true; fails after `timeoutMs` (generous: the machine is shared). */
export async function waitFor(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}
