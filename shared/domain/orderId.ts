import { createHash } from 'node:crypto';

/**
 * Order ids are lower-case RFC 9562 UUIDs. They end up in OData filters, table keys and message
 * ids, so everything that accepts one from outside validates it first.
 */
export const orderIdPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

export function isOrderId(value: unknown): value is string {
  return typeof value === 'string' && orderIdPattern.test(value);
}

export class InvalidOrderId extends Error {
  constructor(public readonly value: unknown) {
    super(`not an order id (a lower-case UUID): ${JSON.stringify(String(value)).slice(0, 80)}`);
    this.name = 'InvalidOrderId';
  }
}

export function assertOrderId(value: unknown): asserts value is string {
  if (!isOrderId(value)) throw new InvalidOrderId(value);
}

/** Namespace for order ids derived from client Idempotency-Keys (a random, fixed UUID). */
const idempotencyNamespace = '7c1d8a4e-2f4b-4c55-9d8e-3b6a1f0e9c21';

/**
 * A name-based (version 5) UUID of the client's Idempotency-Key, scoped by the client id when
 * there is one: the same key always names the same order, so a retried POST finds it.
 */
export function orderIdFromIdempotencyKey(key: string, scope = ''): string {
  const ns = Buffer.from(idempotencyNamespace.replace(/-/g, ''), 'hex');
  const hash = createHash('sha1').update(ns).update(`${scope}\n${key}`, 'utf8').digest();
  const bytes = hash.subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x50;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
