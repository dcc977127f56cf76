import { after, afterEach, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { orderIdFromIdempotencyKey } from '../../shared/domain/index.js';
import * as api from '../../shared/http/orderApi.js';
import { behindPlatformAuth, principalHeaders } from '../http/principal.js';
import { invoke, lastLog, openApiHarness, request, validOrder, type ApiHarness } from './harness.js';

/**
 * An order is read only by a client of the caller scope that submitted it (X-Client-Id, or the
 * platform principal in Azure, or nobody in particular); anyone else gets the very 404 an unknown
 * id gets, so ids derived from (caller, Idempotency-Key) reveal nothing even when computed.
 * Operators (the Operator app role) read every order. Handlers driven with real Dependencies.
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

async function submit(key: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await invoke(
    api.submitOrder,
    h.deps,
    request({
      method: 'POST',
      path: '/orders',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, ...headers },
      body: JSON.stringify(validOrder),
    }),
  );
  assert.equal(res.status, 202, lastLog.join(' | '));
  return (res.jsonBody as { orderId: string }).orderId;
}

async function read(
  orderId: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  const res = await invoke(
    api.getOrder,
    h.deps,
    request({ method: 'GET', path: `/orders/${orderId}`, params: { orderId }, headers }),
  );
  return { status: res.status ?? 200, body: JSON.stringify(res.jsonBody ?? res.body ?? '') };
}

/** The body with the order id taken out, to compare a refusal with an unknown id's 404. */
const withoutId = (body: string, orderId: string) => body.split(orderId).join('<id>');

test("a client cannot read another caller's order, even by computing its id: the same 404 as an unknown id", async () => {
  const key = `owned-${randomUUID()}`;
  const orderId = await submit(key, { 'x-client-id': 'shop-alice' });
  assert.equal(orderId, orderIdFromIdempotencyKey(key, 'client:shop-alice'), 'the id is computable');

  const own = await read(orderId, { 'x-client-id': 'shop-alice' });
  assert.equal(own.status, 200, own.body);

  const unknownId = randomUUID();
  const unknown = await read(unknownId, { 'x-client-id': 'shop-bob' });
  assert.equal(unknown.status, 404);
  for (const headers of [{ 'x-client-id': 'shop-bob' }, {} as Record<string, string>]) {
    const other = await read(orderId, headers);
    assert.equal(other.status, 404, `${JSON.stringify(headers)} read alice's order: ${other.body}`);
    assert.equal(withoutId(other.body, orderId), withoutId(unknown.body, unknownId));
    assert.ok(!other.body.includes('shop-alice') && !other.body.includes('Main St'), other.body);
  }
});

test('an unscoped order is read only by unscoped callers', async () => {
  const orderId = await submit(`anon-${randomUUID()}`);
  assert.equal((await read(orderId)).status, 200);
  assert.equal((await read(orderId, { 'x-client-id': 'shop-carol' })).status, 404);
});

test('behind App Service Authentication the principal owns its orders; X-Client-Id does not open another', async () => {
  await behindPlatformAuth(async () => {
    const p1 = { 'x-ms-client-principal-id': '11111111-1111-4111-8111-111111111111' };
    const p2 = { 'x-ms-client-principal-id': '22222222-2222-4222-8222-222222222222' };
    const orderId = await submit(`p-${randomUUID()}`, { ...p1, 'x-client-id': 'shop-x' });
    assert.equal((await read(orderId, { ...p1, 'x-client-id': 'shop-y' })).status, 200);
    assert.equal((await read(orderId, { ...p2, 'x-client-id': 'shop-x' })).status, 404);
  });
});

test('an operator reads every order; a signed-in principal without the role does not', async () => {
  const orderId = await submit(`op-${randomUUID()}`, { 'x-client-id': 'shop-dave' });
  await behindPlatformAuth(async () => {
    const operator = await read(orderId, principalHeaders());
    assert.equal(operator.status, 200, operator.body);
    const nobody = await read(orderId, principalHeaders('someone@example.com', []));
    assert.equal(nobody.status, 404, nobody.body);
  });
});

test('a malformed X-Client-Id on a read is a 400 naming the header', async () => {
  const orderId = await submit(`bad-${randomUUID()}`, { 'x-client-id': 'shop-erin' });
  const res = await read(orderId, { 'x-client-id': 'has space' });
  assert.equal(res.status, 400, res.body);
  assert.match(res.body, /X-Client-Id/);
});
