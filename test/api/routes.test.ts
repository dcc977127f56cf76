import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { openApiDocument } from '../../shared/http/openapi.js';
import { orderBody, waitFor } from '../app/helpers.js';
import { OpenApiValidator } from './openApiValidator.js';

/**
 * Every route over real HTTP (local host + Azurite + Service Bus emulator), every answer checked
 * against the document the app serves, and every documented status provoked at least once
 * (500 and 503 need a broken dependency: test/api/document.test.ts covers them).
 */
describe('the API answers as its OpenAPI document says', () => {
  let stack: Stack;
  let validator: OpenApiValidator;
  /** "METHOD template status" of every answer seen. */
  const seen = new Set<string>();

  before(async () => {
    stack = await startStack({
      ports: randomPorts,
      // Quick give-up so an order reaches Error (for resubmit) in seconds.
      settings: {
        STEP_TIMEOUT_SECONDS: '2',
        SUPERVISOR_SCHEDULE: '*/1 * * * * *',
        FAILURE_SOFT_THRESHOLD: '1',
        FAILURE_HARD_THRESHOLD: '2',
        EXTENDED_BACKOFF_SECONDS: '1',
      },
    });
    validator = await OpenApiValidator.served(stack.baseUrl);
  });
  after(async () => {
    await stack?.stop();
  });

  async function call(
    method: string,
    path: string,
    options: { json?: unknown; raw?: string; headers?: Record<string, string>; key?: boolean } = {},
  ) {
    const headers: Record<string, string> = { ...options.headers };
    if (options.key !== false) headers['x-functions-key'] = stack.functionKey;
    let body = options.raw;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(`${stack.baseUrl}${path}`, { method, headers, body });
    const text = await res.text();
    validator.assert(method, path, { status: res.status, headers: res.headers, body: text });
    seen.add(`${method} ${validator.templateOf(path)} ${res.status}`);
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  }

  it('serves the generated document anonymously', async () => {
    const res = await call('GET', '/openapi.json', { key: false });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, JSON.parse(JSON.stringify(openApiDocument())));
  });

  it("documents exactly the host's HTTP registrations, with their auth level", () => {
    const registered = stack
      .host()!
      .functions.filter((f) => f.trigger === 'http')
      .flatMap((f) => {
        const [, methods, url] = /^\[([^\]]+)\] (\S+)$/.exec(f.detail)!;
        const path = decodeURIComponent(new URL(url!).pathname).replace(/^\/api/, '');
        return methods!.split(',').map((m) => `${m} ${path} ${f.authLevel}`);
      })
      .sort();
    const doc = openApiDocument();
    const documentedOps = Object.entries(doc.paths)
      .flatMap(([path, ops]) =>
        Object.entries(ops).map(
          ([method, op]) =>
            `${method.toUpperCase()} ${path} ${op.security?.length === 0 ? 'anonymous' : 'function'}`,
        ),
      )
      .sort();
    assert.deepEqual(documentedOps, registered);
  });

  it('every route but the document answers 401 without the function key', async () => {
    const id = randomUUID();
    for (const [method, path] of [
      ['POST', '/orders'],
      ['GET', '/orders?state=Pending'],
      ['GET', `/orders/${id}`],
      ['POST', `/orders/${id}/resubmit`],
      ['POST', `/orders/${id}/cancel`],
    ]) {
      const body = method === 'POST' ? { json: orderBody() } : {};
      assert.equal((await call(method!, path!, { ...body, key: false })).status, 401, `${method} ${path}`);
    }
  });

  it('submit: 202, 202 again for a replay, 400, 401, 409, 413, 415', async () => {
    const key = randomUUID();
    const first = await call('POST', '/orders', { json: orderBody(), headers: { 'idempotency-key': key } });
    assert.equal(first.status, 202);
    const replay = await call('POST', '/orders', { json: orderBody(), headers: { 'idempotency-key': key } });
    assert.equal(replay.status, 202);
    assert.equal(replay.body.orderId, first.body.orderId);
    const reused = await call('POST', '/orders', {
      json: orderBody(['SKU-2']),
      headers: { 'idempotency-key': key },
    });
    assert.equal(reused.status, 409);
    assert.equal((await call('POST', '/orders', { json: { ...orderBody(), extra: 1 } })).status, 400);
    assert.equal(
      (await call('POST', '/orders', { raw: '{"a":', headers: { 'content-type': 'application/json' } }))
        .status,
      400,
    );
    assert.equal(
      (await call('POST', '/orders', { json: orderBody(), headers: { 'idempotency-key': 'has space' } }))
        .status,
      400,
    );
    assert.equal(
      (await call('POST', '/orders', { raw: 'x', headers: { 'content-type': 'text/plain' } })).status,
      415,
    );
    const big = { ...orderBody(), padding: 'x'.repeat(70 * 1024) };
    assert.equal((await call('POST', '/orders', { json: big })).status, 413);
  });

  it('get: 200, 400, 404', async () => {
    const placed = await call('POST', '/orders', { json: orderBody() });
    assert.equal((await call('GET', `/orders/${placed.body.orderId as string}`)).status, 200);
    assert.equal((await call('GET', '/orders/NOT-AN-ID')).status, 400);
    assert.equal((await call('GET', `/orders/${randomUUID()}`)).status, 404);
  });

  it('list: 200 with a next page, 400 for each bad parameter', async () => {
    for (let i = 0; i < 2; i++) await call('POST', '/orders', { json: orderBody() });
    // The state is matched case-insensitively; two Processed orders make a second page.
    const page = await waitFor('two processed orders to list', async () => {
      const p = await call('GET', '/orders?state=processed&pageSize=1');
      return p.status === 200 && typeof p.body.next === 'string' ? p : undefined;
    });
    assert.equal((await call('GET', (page.body.next as string).replace(/^\/api/, ''))).status, 200);
    assert.equal((await call('GET', '/orders?state=Nope')).status, 400);
    assert.equal((await call('GET', '/orders?state=Error&pageSize=0')).status, 400);
    assert.equal((await call('GET', '/orders?state=Error&continuationToken=%21%21')).status, 400);
  });

  it('cancel: 202, then 409; 400 and 404', async () => {
    // Shipping hangs, so the order is still in flight when the cancel arrives.
    const placed = await call('POST', '/orders', { json: orderBody(['SKU-1', 'FAULT:shipping:hang:99']) });
    const id = placed.body.orderId as string;
    assert.equal((await call('POST', `/orders/${id}/cancel?reason=asked`)).status, 202);
    assert.equal((await call('POST', `/orders/${id}/cancel`)).status, 409);
    assert.equal((await call('POST', '/orders/NOT-AN-ID/cancel')).status, 400);
    assert.equal((await call('POST', `/orders/${randomUUID()}/cancel`)).status, 404);
  });

  it('resubmit: 409 unless in Error, 202 in Error; 400 and 404', async () => {
    const placed = await call('POST', '/orders', { json: orderBody(['SKU-1', 'FAULT:shipping:hang:99']) });
    const id = placed.body.orderId as string;
    assert.equal((await call('POST', `/orders/${id}/resubmit`)).status, 409);
    await waitFor(
      'the order to give up and end in Error',
      async () => (await call('GET', `/orders/${id}`)).body.processState === 'Error',
      120_000,
      500,
    );
    const resubmitted = await call('POST', `/orders/${id}/resubmit`);
    assert.equal(resubmitted.status, 202);
    assert.equal(resubmitted.body.processState, 'Pending');
    assert.equal((await call('POST', '/orders/NOT-AN-ID/resubmit')).status, 400);
    assert.equal((await call('POST', `/orders/${randomUUID()}/resubmit`)).status, 404);
  });

  it('every documented status was answered at least once (but 500 and 503)', () => {
    const missing = Object.entries(openApiDocument().paths).flatMap(([path, ops]) =>
      Object.entries(ops).flatMap(([method, op]) =>
        Object.keys(op.responses)
          .filter((s) => s !== '500' && s !== '503')
          .map((s) => `${method.toUpperCase()} ${path} ${s}`)
          .filter((k) => !seen.has(k)),
      ),
    );
    assert.deepEqual(missing, []);
  });
});
