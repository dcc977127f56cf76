import { after, afterEach, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { HttpResponseInit } from '@azure/functions';
import { orderIdFromIdempotencyKey } from '../../shared/domain/index.js';
import * as api from '../../shared/http/orderApi.js';
import { invoke, lastLog, openApiHarness, request, validOrder, type ApiHarness } from './harness.js';

/**
 * Idempotency keys belong to the caller who sent them: two callers using the same key get two
 * orders, and a conflict never names an order. Driven through the handlers with real Dependencies
 * (Azurite, the Service Bus emulator); the caller is the platform principal when App Service
 * Authentication set it, else the X-Client-Id header, else nobody in particular.
 */
let h: ApiHarness;
before(async () => {
  h = await openApiHarness();
});
after(async () => {
  await h?.stop();
});
afterEach(() => {
  delete process.env.WEBSITE_AUTH_ENABLED;
});

interface Answer {
  status: number;
  body: Record<string, unknown>;
  text: string;
  contentType: string;
}

async function submit(key: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res: HttpResponseInit = await invoke(
    api.submitOrder,
    h.deps,
    request({
      method: 'POST',
      path: '/orders',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, ...headers },
      body: JSON.stringify(body),
    }),
  );
  const text = res.jsonBody !== undefined ? JSON.stringify(res.jsonBody) : String(res.body ?? '');
  const contentType = String((res.headers as Record<string, string> | undefined)?.['Content-Type'] ?? '');
  return {
    status: res.status ?? 200,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
    text,
    contentType,
  };
}

async function customerOf(orderId: string, headers: Record<string, string> = {}): Promise<unknown> {
  const res = await invoke(
    api.getOrder,
    h.deps,
    request({ method: 'GET', path: `/orders/${orderId}`, params: { orderId }, headers }),
  );
  assert.equal(res.status, 200, lastLog.join(' | '));
  return (res.jsonBody as { customerId: unknown }).customerId;
}

const orderFor = (customerId: string) => ({ ...validOrder, customerId });

test('two callers using the same Idempotency-Key get two orders, and neither learns the other', async () => {
  const key = `shared-${randomUUID()}`;
  const alice = await submit(key, orderFor('alice'), { 'x-client-id': 'shop-alice' });
  const bob = await submit(key, orderFor('bob'), { 'x-client-id': 'shop-bob' });
  assert.equal(alice.status, 202, alice.text);
  assert.equal(bob.status, 202, bob.text);
  assert.notEqual(alice.body.orderId, bob.body.orderId);
  assert.ok(!bob.text.includes(String(alice.body.orderId)), "bob's answer never names alice's order");
  assert.equal(await customerOf(String(alice.body.orderId), { 'x-client-id': 'shop-alice' }), 'alice');
  assert.equal(await customerOf(String(bob.body.orderId), { 'x-client-id': 'shop-bob' }), 'bob');
});

test('one caller keeps idempotency: same key and body is the same order; another body is a 409 naming no order', async () => {
  const key = `mine-${randomUUID()}`;
  const headers = { 'x-client-id': 'shop-carol' };
  const first = await submit(key, orderFor('carol'), headers);
  const again = await submit(key, orderFor('carol'), headers);
  assert.equal(first.status, 202);
  assert.equal(again.status, 202);
  assert.equal(again.body.orderId, first.body.orderId);
  const conflict = await submit(key, orderFor('mallory'), headers);
  assert.equal(conflict.status, 409);
  assert.match(conflict.contentType, /^application\/problem\+json/);
  assert.equal(conflict.body.type, 'https://github.com/order-processing-sas/problems/idempotency-key-reused');
  assert.ok(!conflict.text.includes(String(first.body.orderId)), conflict.text);
});

test('callers without an identity still share one key space, but a conflict never names the order', async () => {
  const key = `anon-${randomUUID()}`;
  const first = await submit(key, orderFor('anon-1'));
  assert.equal(first.status, 202);
  // Unchanged derivation for an unscoped key: chaos's phantom check and the README curl rely on it.
  assert.equal(first.body.orderId, orderIdFromIdempotencyKey(key));
  const other = await submit(key, orderFor('anon-2'));
  assert.equal(other.status, 409);
  assert.ok(!other.text.includes(String(first.body.orderId)), other.text);
  // A caller with an id using the same key is a different order again.
  const scoped = await submit(key, orderFor('scoped'), { 'x-client-id': 'shop-dave' });
  assert.equal(scoped.status, 202);
  assert.notEqual(scoped.body.orderId, first.body.orderId);
});

test('behind App Service Authentication the platform principal is the caller, whatever X-Client-Id says', async () => {
  process.env.WEBSITE_AUTH_ENABLED = 'True';
  const key = `principal-${randomUUID()}`;
  const p1 = { 'x-ms-client-principal-id': '11111111-1111-4111-8111-111111111111' };
  const p2 = { 'x-ms-client-principal-id': '22222222-2222-4222-8222-222222222222' };
  const a = await submit(key, orderFor('p1'), { ...p1, 'x-client-id': 'shop-x' });
  const b = await submit(key, orderFor('p2'), { ...p2, 'x-client-id': 'shop-x' });
  assert.equal(a.status, 202);
  assert.equal(b.status, 202, 'the same X-Client-Id does not make two principals one caller');
  assert.notEqual(a.body.orderId, b.body.orderId);
  const again = await submit(key, orderFor('p1'), { ...p1, 'x-client-id': 'shop-y' });
  assert.equal(again.body.orderId, a.body.orderId, 'nor does another X-Client-Id split one principal');
});

test('without App Service Authentication a client-sent principal header is not trusted', async () => {
  const key = `forged-${randomUUID()}`;
  const first = await submit(key, orderFor('real'), { 'x-client-id': 'shop-eve' });
  const forged = await submit(key, orderFor('forged'), {
    'x-client-id': 'shop-eve',
    'x-ms-client-principal-id': '33333333-3333-4333-8333-333333333333',
  });
  assert.equal(first.status, 202);
  assert.equal(forged.status, 409, 'the header is ignored: same caller, same key, other body');
});

test('a malformed X-Client-Id is a 400 problem naming the header, and nothing is written', async () => {
  for (const bad of ['', ' spaced id', 'x'.repeat(129), 'tab\there']) {
    const before = h.writes();
    const res = await submit(`bad-${randomUUID()}`, orderFor('x'), { 'x-client-id': bad });
    assert.equal(res.status, 400, `${JSON.stringify(bad)}: ${res.text}`);
    assert.match(res.contentType, /^application\/problem\+json/);
    assert.match(String(res.body.detail), /X-Client-Id/);
    assert.equal(h.writes(), before, 'a refused request writes nothing');
  }
});
