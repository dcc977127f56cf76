import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import fc from 'fast-check';
import { startStack, type Stack } from '../../local/stack.js';
import { validOrder } from './harness.js';

/**
 * The same API over real HTTP, through the local host child process of a full stack: keys on
 * every route, size and depth limits, and a few hundred generated requests.
 */
let stack: Stack;
before(async () => {
  stack = await startStack({
    ports: { http: 0, serviceBus: 0, blob: 0, queue: 0, table: 0, inventory: 0, payment: 0, shipping: 0 },
    settings: { SUPERVISOR_SCHEDULE: '0 0 0 1 1 *' },
  });
});
after(async () => {
  await stack?.stop();
});

const someId = '3f2b8c1e-5d4a-4b6c-9e7f-0a1b2c3d4e5f';
const clientRoutes: Array<{ method: string; path: string }> = [
  { method: 'POST', path: '/orders' },
  { method: 'GET', path: `/orders/${someId}` },
];
const operatorRoutes: Array<{ method: string; path: string }> = [
  { method: 'GET', path: '/orders?state=Pending' },
  { method: 'POST', path: `/orders/${someId}/resubmit` },
  { method: 'POST', path: `/orders/${someId}/cancel` },
];
const asOperator = () => ({ authorization: `Bearer ${stack.operatorKey}` });

function send(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string | Uint8Array,
) {
  return fetch(`${stack.baseUrl}${path}`, { method, headers, body, signal: AbortSignal.timeout(30_000) });
}

test('every client route refuses a missing or a wrong key with 401, every operator route any key with 403, and nothing is written', async () => {
  for (const r of operatorRoutes) {
    const body = r.method === 'POST' ? JSON.stringify(validOrder) : undefined;
    const json = { 'content-type': 'application/json' };
    const none = await send(r.method, r.path, json, body);
    await none.arrayBuffer();
    assert.equal(none.status, 401, `${r.method} ${r.path} without credentials`);
    for (const key of ['wrong', '', stack.functionKey]) {
      const res = await send(r.method, r.path, { ...json, 'x-functions-key': key }, body);
      await res.arrayBuffer();
      assert.equal(
        res.status,
        key === '' ? 401 : 403,
        `${r.method} ${r.path} with key ${JSON.stringify(key)}`,
      );
    }
  }
  for (const r of clientRoutes) {
    const body = r.method === 'POST' ? JSON.stringify(validOrder) : undefined;
    const json = { 'content-type': 'application/json' };
    for (const headers of [
      json,
      { ...json, 'x-functions-key': 'wrong' },
      { ...json, 'x-functions-key': '' },
    ]) {
      const res = await send(r.method, r.path, headers, body);
      await res.arrayBuffer();
      assert.equal(res.status, 401, `${r.method} ${r.path} with ${JSON.stringify(headers)}`);
    }
    const viaQuery = await send(
      r.method,
      `${r.path}${r.path.includes('?') ? '&' : '?'}code=wrong`,
      json,
      body,
    );
    await viaQuery.arrayBuffer();
    assert.equal(viaQuery.status, 401, `${r.method} ${r.path}?code=wrong`);
  }
  const listed = await send('GET', '/orders?state=Pending', asOperator());
  assert.equal(listed.status, 200);
  assert.deepEqual(((await listed.json()) as { orders: unknown[] }).orders, [], 'no order was written');
});

test('oversized and deeply nested bodies are refused (413 / 400)', async () => {
  const key = { 'x-functions-key': stack.functionKey, 'content-type': 'application/json' };
  const big = JSON.stringify({ ...validOrder, customerId: 'x'.repeat(70 * 1024) });
  const tooLarge = await send('POST', '/orders', key, big);
  await tooLarge.arrayBuffer();
  assert.equal(tooLarge.status, 413);
  // A body over the host's 1 MiB is refused unread and the connection closed: a client still
  // writing it may see EPIPE before the 413 (CI, session 41). The test below sends only its start.
  const deep = await send('POST', '/orders', key, '['.repeat(10_000) + ']'.repeat(10_000));
  await deep.arrayBuffer();
  assert.equal(deep.status, 400);
  const deepObject = await send('POST', '/orders', key, '{"a":'.repeat(5000) + '1' + '}'.repeat(5000));
  await deepObject.arrayBuffer();
  assert.equal(deepObject.status, 400);
  const listed = await send('GET', '/orders?state=Pending', asOperator());
  assert.deepEqual(((await listed.json()) as { orders: unknown[] }).orders, []);
});

/**
 * Sends the request line, the headers and the first `sendBytes` of the body, then waits with the
 * socket open (never sending the rest) for the response head. Resolves with the status and the
 * bytes sent; rejects when nothing arrives within `guardMs` (a guard, not a timing claim).
 */
function partialUpload(
  path: string,
  headers: Record<string, string>,
  sendBytes: number,
  guardMs = 20_000,
): Promise<{ status: number; head: string; sent: number }> {
  const url = new URL(`${stack.baseUrl}${path}`);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: url.hostname, port: Number(url.port) });
    let received = '';
    let sent = 0;
    const guard = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(
          `no response within ${guardMs} ms after ${sent} of ${headers['content-length']} declared bytes`,
        ),
      );
    }, guardMs);
    socket.on('error', (e) => {
      clearTimeout(guard);
      reject(e);
    });
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) return;
      clearTimeout(guard);
      socket.destroy();
      const head = received.slice(0, end);
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]), head, sent });
    });
    socket.on('connect', () => {
      const lines = [`POST ${url.pathname}${url.search} HTTP/1.1`, `host: ${url.host}`];
      for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      const part = Buffer.alloc(sendBytes, 0x20);
      socket.write(part);
      sent = part.length;
    });
  });
}

const declaredHeaders = (declared: number) => ({
  'x-functions-key': stack.functionKey,
  'content-type': 'application/json',
  'content-length': String(declared),
});

test('a Content-Length of 200 MB, over any host limit, is answered 413 while the body is still unsent', async () => {
  // Also proves partialUpload itself: the host refuses on the header alone.
  const declared = 200 * 1024 * 1024;
  const res = await partialUpload('/orders', declaredHeaders(declared), 1024);
  assert.equal(res.status, 413, res.head);
  assert.ok(res.sent < declared);
});

test('a Content-Length over the host limit (FUNCTIONS_REQUEST_BODY_SIZE_LIMIT, 1 MiB) is answered 413 while the body is still unsent', async () => {
  // Bodies between the API's 64 KiB and the host's 1 MiB are read, then refused with problem+json
  // (tested in test/app/e2eOperator.test.ts); above 1 MiB the host refuses them unread, as Azure's does.
  const declared = 2 * 1024 * 1024;
  const res = await partialUpload('/orders', declaredHeaders(declared), 1024, 10_000);
  assert.equal(res.status, 413, res.head);
  assert.ok(res.sent < declared);
  const listed = await send('GET', '/orders?state=Pending', asOperator());
  assert.deepEqual(((await listed.json()) as { orders: unknown[] }).orders, [], 'nothing was written');
});

test('300 generated requests over real HTTP: never a 5xx', async () => {
  const key = stack.functionKey;
  const pathArb = fc.oneof(
    fc.constant('/orders'),
    fc.string({ maxLength: 40 }).map((s) => `/orders/${encodeURIComponent(s)}`),
    fc.string({ maxLength: 40 }).map((s) => `/orders/${encodeURIComponent(s)}/cancel`),
    fc.string({ maxLength: 40 }).map((s) => `/orders/${encodeURIComponent(s)}/resubmit`),
    fc
      .tuple(
        fc.constantFrom('Pending', "Error' or '1' eq '1", 'x'),
        fc.constantFrom('1', '100', '-1', "1' or '"),
      )
      .map(([s, n]) => `/orders?state=${encodeURIComponent(s)}&pageSize=${encodeURIComponent(n)}`),
  );
  const bodyArb = fc.oneof(
    fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'null'),
    fc.string({ maxLength: 100 }),
    fc.constant(JSON.stringify(validOrder)),
  );
  let count = 0;
  await fc.assert(
    fc.asyncProperty(
      pathArb,
      fc.constantFrom('GET', 'POST'),
      bodyArb,
      fc.constantFrom('application/json', 'text/plain'),
      async (path, method, body, type) => {
        count += 1;
        const res = await send(
          method,
          path,
          { 'x-functions-key': key, 'content-type': type },
          method === 'POST' ? body : undefined,
        );
        const text = await res.text();
        assert.ok(res.status < 500, `${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
      },
    ),
    { numRuns: 300 },
  );
  assert.equal(count, 300);
});

test('over HTTP, two clients sharing the function key and an Idempotency-Key get two orders; a 409 names none', async () => {
  const key = `shared-over-http-${Date.now()}`;
  const post = async (clientId: string, customerId: string) => {
    const res = await send(
      'POST',
      '/orders',
      {
        'x-functions-key': stack.functionKey,
        'content-type': 'application/json',
        'idempotency-key': key,
        'x-client-id': clientId,
      },
      JSON.stringify({ ...validOrder, customerId }),
    );
    return { status: res.status, text: await res.text() };
  };
  const a = await post('shop-a', 'alice');
  const b = await post('shop-b', 'bob');
  assert.equal(a.status, 202, a.text);
  assert.equal(b.status, 202, b.text);
  const idA = (JSON.parse(a.text) as { orderId: string }).orderId;
  const idB = (JSON.parse(b.text) as { orderId: string }).orderId;
  assert.notEqual(idA, idB);
  const conflict = await post('shop-a', 'someone-else');
  assert.equal(conflict.status, 409);
  assert.ok(!conflict.text.includes(idA) && !conflict.text.includes(idB), conflict.text);
});
