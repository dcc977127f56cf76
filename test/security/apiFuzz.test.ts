import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { HttpResponseInit } from '@azure/functions';
import * as api from '../../shared/http/orderApi.js';
import { invoke, lastLog, openApiHarness, request, validOrder, type ApiHarness } from './harness.js';
import { behindPlatformAuth, principalHeaders } from '../http/principal.js';

/**
 * Property-based fuzzing of the HTTP API, straight through the handlers of shared/http/orderApi.ts
 * (behind withProblemErrors, as functions/*.ts run them) with real Dependencies on Azurite and the
 * Service Bus emulator. Properties: never a 5xx; a refused request writes nothing (no table write,
 * no message); OData-shaped input never reaches another order's data.
 */
let h: ApiHarness;
before(async () => {
  h = await openApiHarness();
});
after(async () => {
  await h?.stop();
});

function status(res: HttpResponseInit): number {
  return res.status ?? 200;
}

function explain(res: HttpResponseInit): string {
  return `status ${status(res)} body ${JSON.stringify(res.jsonBody)} log ${lastLog.join(' | ')}`;
}

const headerValue = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom("' or 1 eq 1 or '", "x' or PartitionKey ne '", '%27', '\u0000', ' ', 'a'.repeat(201)),
);
const contentType = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-8',
  'application/problem+json',
  'text/plain',
  'application/x-www-form-urlencoded',
  '',
  'APPLICATION/JSON',
);
/** Bodies from many shapes: valid orders with one field mutated, any JSON, raw text and bytes. */
const mutatedOrder = fc
  .record({
    path: fc.constantFrom(
      'customerId',
      'items',
      'shippingAddress',
      'extra',
      'items.0.sku',
      'items.0.quantity',
      'shippingAddress.country',
    ),
    value: fc.jsonValue({ maxDepth: 3 }),
  })
  .map(({ path, value }) => {
    const order = structuredClone(validOrder) as Record<string, unknown>;
    const parts = path.split('.');
    let target = order as Record<string, unknown>;
    for (const p of parts.slice(0, -1)) target = target[p] as Record<string, unknown>;
    target[parts[parts.length - 1]] = value;
    return JSON.stringify(order);
  });
const body = fc.oneof(
  { weight: 4, arbitrary: mutatedOrder },
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? 'null') },
  { weight: 2, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.constant(JSON.stringify(validOrder)) },
);

test('POST /orders: 10,000 generated bodies and headers, never a 5xx, a refusal writes nothing', async () => {
  let accepted = 0;
  let refused = 0;
  await fc.assert(
    fc.asyncProperty(body, contentType, fc.option(headerValue, { nil: undefined }), async (b, type, key) => {
      const headers: Record<string, string> = {};
      if (type) headers['content-type'] = type;
      if (key !== undefined) headers['idempotency-key'] = key;
      const before = h.writes();
      let res: HttpResponseInit;
      try {
        res = await invoke(
          api.submitOrder,
          h.deps,
          request({ method: 'POST', path: '/orders', headers, body: b }),
        );
      } catch (e) {
        // Building the request itself may refuse a header value (as node:http would): not the app's call.
        if (e instanceof TypeError) return;
        throw e;
      }
      const s = status(res);
      assert.ok(s < 500, explain(res));
      if (s === 202 || s === 200) accepted += 1;
      else {
        refused += 1;
        assert.ok([400, 409, 413, 415].includes(s), explain(res));
        assert.equal(h.writes(), before, `a ${s} wrote: ${explain(res)}`);
      }
    }),
    { numRuns: 10_000 },
  );
  assert.ok(refused > 5000, `refused ${refused}`);
  assert.ok(accepted > 0, 'some generated orders were valid');
});

const anyId = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.uuid().map((u) => u.toLowerCase()),
  fc.constantFrom(
    "' or PartitionKey ne '",
    "00000000-0000-4000-8000-000000000000' or '1' eq '1",
    "x' or RowKey eq 'state",
    '../state',
    '%27%20or%201%20eq%201',
    'ABCDEF00-0000-4000-8000-000000000000',
  ),
);

test('GET, resubmit and cancel with generated ids: never a 5xx, never another order, a refusal writes nothing', async () => {
  // A real order whose data must never leak to another id.
  const own = await invoke(
    api.submitOrder,
    h.deps,
    request({
      method: 'POST',
      path: '/orders',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(validOrder),
    }),
  );
  assert.equal(status(own), 202);
  const ownId = (own.jsonBody as { orderId: string }).orderId;
  await fc.assert(
    fc.asyncProperty(anyId, fc.constantFrom('get', 'resubmit', 'cancel'), async (id, action) => {
      const before = h.writes();
      const req = request({
        method: action === 'get' ? 'GET' : 'POST',
        path: `/orders/${encodeURIComponent(id)}${action === 'get' ? '' : `/${action}`}`,
        params: { orderId: id },
        // Resubmit and cancel by a signed-in operator, so the fuzzing reaches past the guard.
        headers: action === 'get' ? {} : principalHeaders(),
      });
      const handler =
        action === 'get' ? api.getOrder : action === 'resubmit' ? api.resubmitOrder : api.cancelOrder;
      const res = await behindPlatformAuth(() => invoke(handler, h.deps, req));
      const s = status(res);
      assert.ok(s < 500, explain(res));
      assert.ok([200, 400, 404, 409].includes(s), explain(res));
      if (s !== 200) assert.equal(h.writes(), before, explain(res));
      if (s === 200) assert.equal((res.jsonBody as { orderId: string }).orderId, id);
      if (id !== ownId)
        assert.ok(!JSON.stringify(res.jsonBody ?? '').includes(ownId), `leaked ${ownId} for ${id}`);
    }),
    { numRuns: 1500 },
  );
});

const odataish = fc.constantFrom(
  "' or 1 eq 1 or '",
  "x' or PartitionKey ne '",
  "state' or RowKey ne '",
  '%27',
);

async function fuzzListOrders(tokenArb: fc.Arbitrary<string>): Promise<void> {
  const injection = fc.constantFrom(
    "Processed' or ProcessState ne '",
    'Processed or true',
    "Error') or (1 eq 1",
    '1 or 1 eq 1',
    '-1',
    '1e3',
    '0x10',
    'eyJuZXh0UGFydGl0aW9uS2V5IjoiJyBvciAxIGVxIDEifQ==',
    "' or ''='",
  );
  const stateArb = fc.oneof(
    fc.constantFrom('Pending', 'processed', 'ERROR', 'Compensated'),
    fc.string({ maxLength: 20 }),
    injection,
  );
  const sizeArb = fc.oneof(
    fc.integer({ min: -5, max: 200 }).map(String),
    fc.string({ maxLength: 8 }),
    injection,
  );
  await fc.assert(
    fc.asyncProperty(
      stateArb,
      fc.option(sizeArb, { nil: undefined }),
      fc.option(tokenArb, { nil: undefined }),
      async (state, size, token) => {
        const query: Record<string, string> = { state };
        if (size !== undefined) query.pageSize = size;
        if (token !== undefined) query.continuationToken = token;
        const before = h.writes();
        const res = await behindPlatformAuth(() =>
          invoke(
            api.listOrders,
            h.deps,
            request({ method: 'GET', path: '/orders', query, headers: principalHeaders() }),
          ),
        );
        const s = status(res);
        assert.ok(s < 500, `state=${state} pageSize=${size} token=${token}: ${explain(res)}`);
        assert.ok([200, 400].includes(s), explain(res));
        assert.equal(h.writes(), before);
        if (s === 200) {
          const page = res.jsonBody as { state: string; orders: Array<{ processState: string }> };
          for (const o of page.orders)
            assert.equal(o.processState, page.state, 'a page holds only the asked state');
        }
      },
    ),
    { numRuns: 1500 },
  );
}

/** Tokens the table SDK can decode, carrying OData-shaped partition and row keys. */
const wellFormedToken = fc
  .record({
    nextPartitionKey: fc.oneof(odataish, fc.string({ maxLength: 20 })),
    nextRowKey: fc.oneof(odataish, fc.string({ maxLength: 20 })),
  })
  .map((t) => Buffer.from(JSON.stringify(t)).toString('base64'));

test('listOrders with OData-shaped state, pageSize and (decodable) continuationToken: 400 or a page of that state only', async () => {
  await fuzzListOrders(wellFormedToken);
});

test('listOrders with an arbitrary continuationToken: 400, never a 5xx', async () => {
  await fuzzListOrders(fc.oneof(fc.base64String({ maxLength: 60 }), fc.string({ maxLength: 30 }), odataish));
});

test('an OData-shaped Idempotency-Key names its own new order, never an existing one', async () => {
  const first = await invoke(
    api.submitOrder,
    h.deps,
    request({
      method: 'POST',
      path: '/orders',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'plain-key-1' },
      body: JSON.stringify(validOrder),
    }),
  );
  const firstId = (first.jsonBody as { orderId: string }).orderId;
  for (const key of ["plain-key-1' or '1' eq '1", "' or PartitionKey ne '", 'plain-key-1%27']) {
    const res = await invoke(
      api.submitOrder,
      h.deps,
      request({
        method: 'POST',
        path: '/orders',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(validOrder),
      }),
    );
    const s = status(res);
    assert.ok(s === 202 || s === 400, explain(res));
    if (s === 202) assert.notEqual((res.jsonBody as { orderId: string }).orderId, firstId, key);
  }
});
