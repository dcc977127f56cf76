import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ServiceBusClient } from '@azure/service-bus';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { StateStore } from '../../shared/stateStore/index.js';
import { Collector } from '../app/helpers.js';
import { validOrder } from './harness.js';

/**
 * Operators are not clients, over real HTTP through the local host (which plays App Service
 * Authentication), Azurite and the Service Bus emulator. The Scheduler is switched off
 * (AzureWebJobs.scheduler.Disabled) so a submitted order stays Pending until someone acts on it:
 * whatever a refused request could have changed would show.
 */
let stack: Stack;
let store: StateStore;
let bus: ServiceBusClient;
let statuses: Collector;

before(async () => {
  stack = await startStack({
    ports: randomPorts,
    settings: { SUPERVISOR_SCHEDULE: '0 0 0 1 1 *', 'AzureWebJobs.scheduler.Disabled': 'true' },
  });
  store = await StateStore.open({
    kind: 'connectionString',
    connectionString: stack.env.StateStoreConnection,
  });
  bus = new ServiceBusClient(stack.env.ServiceBusConnection);
  statuses = new Collector(bus, 'order-status', 'all');
});
after(async () => {
  await statuses?.close();
  await bus?.close();
  await stack?.stop();
});

interface Answer {
  status: number;
  contentType: string;
  body: Record<string, unknown>;
}

async function send(method: string, path: string, headers: Record<string, string> = {}, body?: unknown) {
  const res = await fetch(`${stack.baseUrl}${path}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    if (text) parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { text };
  }
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', body: parsed } as Answer;
}

const clientKey = () => ({ 'x-functions-key': stack.functionKey });
const operator = () => ({ authorization: `Bearer ${stack.operatorKey}` });

/** A principal a client makes up: the Operator role, base64 JSON as App Service would send it. */
function forgedPrincipal(name = 'mallory'): Record<string, string> {
  const principal = {
    auth_typ: 'aad',
    name_typ: 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name',
    role_typ: 'http://schemas.microsoft.com/ws/2008/06/identity/claims/role',
    claims: [
      { typ: 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name', val: name },
      { typ: 'http://schemas.microsoft.com/ws/2008/06/identity/claims/role', val: 'Operator' },
      { typ: 'roles', val: 'Operator' },
    ],
  };
  return {
    'x-ms-client-principal': Buffer.from(JSON.stringify(principal)).toString('base64'),
    'x-ms-client-principal-name': name,
    'x-ms-client-principal-id': '44444444-4444-4444-8444-444444444444',
    'x-ms-client-principal-idp': 'aad',
  };
}

async function pendingOrder(): Promise<string> {
  const res = await send('POST', '/orders', { ...clientKey(), 'idempotency-key': randomUUID() }, validOrder);
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return String(res.body.orderId);
}

function assertProblem(res: Answer, status: number, what: string): void {
  assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
  assert.match(res.contentType, /^application\/problem\+json/, what);
  assert.equal(res.body.status, status, what);
  assert.equal(typeof res.body.detail, 'string', what);
}

async function unchanged(orderId: string, what: string): Promise<void> {
  const loaded = await store.load(orderId);
  assert.equal(loaded?.state.processState, 'Pending', `${what}: the order did not move`);
  assert.equal(loaded?.state.run, 1, what);
}

const operatorRoutes = (orderId: string) => [
  { method: 'GET', path: '/orders?state=Pending' },
  { method: 'POST', path: `/orders/${orderId}/resubmit` },
  { method: 'POST', path: `/orders/${orderId}/cancel?reason=client` },
];

test('a client key on every operator route is a 403 problem, and nothing changes', async () => {
  const orderId = await pendingOrder();
  for (const r of operatorRoutes(orderId)) {
    assertProblem(
      await send(r.method, r.path, clientKey()),
      403,
      `${r.method} ${r.path} with x-functions-key`,
    );
    const viaQuery = `${r.path}${r.path.includes('?') ? '&' : '?'}code=${encodeURIComponent(stack.functionKey)}`;
    assertProblem(await send(r.method, viaQuery), 403, `${r.method} ${r.path} with ?code=`);
  }
  await unchanged(orderId, 'after client-key calls');
  assert.deepEqual(
    statuses
      .for(orderId)
      .map((m) => (m.body as { event: string }).event)
      .filter((e) => e !== 'received'),
    [],
    'no status event beyond the submission for a refused action',
  );
});

test('no credential on an operator route is a 401 problem; a wrong operator token is refused too', async () => {
  const orderId = await pendingOrder();
  for (const r of operatorRoutes(orderId)) {
    const res = await send(r.method, r.path);
    assertProblem(res, 401, `${r.method} ${r.path} without credentials`);
    const wrong = await send(r.method, r.path, { authorization: 'Bearer not-the-operator-key' });
    assert.equal(wrong.status, 401, `${r.method} ${r.path} with a wrong token`);
  }
  await unchanged(orderId, 'after anonymous calls');
});

test('a client forging x-ms-client-principal with the Operator role gets 403 (with a key) or 401 (without)', async () => {
  const orderId = await pendingOrder();
  for (const r of operatorRoutes(orderId)) {
    assertProblem(
      await send(r.method, r.path, { ...clientKey(), ...forgedPrincipal() }),
      403,
      `${r.method} ${r.path} forged principal with a key`,
    );
    assertProblem(
      await send(r.method, r.path, forgedPrincipal()),
      401,
      `${r.method} ${r.path} forged principal`,
    );
  }
  await unchanged(orderId, 'after forged principals');
});

test('the operator credential works on every operator route, and the action is recorded with who did it', async () => {
  const orderId = await pendingOrder();
  const listed = await send('GET', '/orders?state=Pending&pageSize=100', operator());
  assert.equal(listed.status, 200, JSON.stringify(listed.body));
  assert.ok(
    (listed.body.orders as Array<{ orderId: string }>).some((o) => o.orderId === orderId),
    'the list names the pending order',
  );
  // Resubmit is only for orders in Error: the operator passes the guard and meets the domain's 409.
  const early = await send('POST', `/orders/${orderId}/resubmit`, operator());
  assert.equal(early.status, 409, JSON.stringify(early.body));
  assert.equal(early.body.processState, 'Pending');

  // A forged name next to the real credential is replaced by the platform's principal.
  const cancel = await send('POST', `/orders/${orderId}/cancel?reason=customer%20asked`, {
    ...operator(),
    'x-ms-client-principal-name': 'mallory',
  });
  assert.equal(cancel.status, 202, JSON.stringify(cancel.body));
  const loaded = await store.load(orderId);
  assert.equal(loaded?.state.processState, 'Compensated');
  const detail = await waitForDetail(orderId);
  assert.equal(detail, 'cancelled by local-operator: customer asked');
});

test('client routes still take the function key; the operator credential alone is not a function key', async () => {
  const orderId = await pendingOrder();
  const read = await send('GET', `/orders/${orderId}`, clientKey());
  assert.equal(read.status, 200);
  assert.equal((await send('GET', `/orders/${orderId}`, operator())).status, 401);
  const submitted = await send(
    'POST',
    '/orders',
    { ...operator(), 'idempotency-key': randomUUID() },
    validOrder,
  );
  assert.equal(submitted.status, 401);
});

async function waitForDetail(orderId: string): Promise<string | undefined> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const found = statuses
      .for(orderId)
      .map((m) => (m.body as { detail?: string }).detail)
      .find((d) => d?.startsWith('cancelled by'));
    if (found || Date.now() > deadline) return found;
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("an operator's POST sent by another site is refused and changes nothing; the console's own origin is fine", async () => {
  // In Azure the operator's browser holds App Service Authentication's session cookie, which a page
  // on another site can make the browser send with a form POST: the browser's Origin and
  // Sec-Fetch-Site headers tell such a request apart.
  const orderId = await pendingOrder();
  const foreigns: Record<string, string>[] = [
    { origin: 'https://evil.example' },
    { 'sec-fetch-site': 'cross-site' },
  ];
  for (const foreign of foreigns) {
    const res = await send('POST', `/orders/${orderId}/cancel?reason=csrf`, { ...operator(), ...foreign });
    assert.equal(res.status, 403, JSON.stringify(res.body));
    assert.match(res.contentType, /application\/problem\+json/);
    assert.match(String(res.body.title), /cross-site/i);
  }
  assert.equal((await store.load(orderId))?.state.processState, 'Pending', 'nothing changed');
  // GETs are not actions: a link from elsewhere may open a page.
  const read = await send('GET', '/orders?state=Pending', { ...operator(), origin: 'https://evil.example' });
  assert.equal(read.status, 200);
  const own = await send('POST', `/orders/${orderId}/cancel?reason=same-origin`, {
    ...operator(),
    origin: new URL(stack.baseUrl).origin,
    'sec-fetch-site': 'same-origin',
  });
  assert.equal(own.status, 202, JSON.stringify(own.body));
});
