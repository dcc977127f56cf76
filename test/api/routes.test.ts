import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { openApiDocument, type OperationObject } from '../../shared/http/openapi.js';
import { orderBody, waitFor } from '../app/helpers.js';
import { OpenApiValidator } from './openApiValidator.js';
import { ServiceBusClient } from '@azure/service-bus';
import { queues } from '../../shared/messaging/entities.js';
import { defaultRetention } from '../../shared/domain/retention.js';
import { orderIdFromIdempotencyKey } from '../../shared/domain/index.js';
import { Retention } from '../../shared/retention/retention.js';
import { StateStore } from '../../shared/stateStore/index.js';

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
        // Long enough to catch an order waiting out its back-off (retry skips it).
        EXTENDED_BACKOFF_SECONDS: '60',
        // order@2: an approval step and payment by webhook, for the waiting-step routes.
        NEW_ORDER_WORKFLOW_VERSION: '2',
        // A global call limit the service-limits readout must report (high enough to slow nothing).
        PAYMENT_MAX_CALLS_PER_SECOND: '50',
        // Each customer's intake: a burst of 10 at once, then one per 100 ms, the rest refused (no
        // wait for a turn), for the submit's 429. The other tests submit a few orders of one
        // customer at a time. 90 at once all pass only if they reach the host over 8 s (at 30 a
        // second, this test failed once in a run of several test files at once).
        CUSTOMER_INTAKE_PER_SECOND: '10',
        CUSTOMER_INTAKE_MAX_WAIT_SECONDS: '0',
      },
    });
    validator = await OpenApiValidator.served(stack.baseUrl);
  });
  after(async () => {
    await stack?.stop();
  });

  /** Who calls: a client (function key), an operator (operator bearer credential) or nobody. */
  type Caller = 'client' | 'operator' | 'nobody';

  async function call(
    method: string,
    path: string,
    options: { json?: unknown; raw?: string; headers?: Record<string, string>; as?: Caller } = {},
  ) {
    const headers: Record<string, string> = { ...options.headers };
    const caller = options.as ?? 'client';
    if (caller === 'client') headers['x-functions-key'] = stack.functionKey;
    if (caller === 'operator') headers.authorization = `Bearer ${stack.operatorKey}`;
    let body = options.raw;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(`${stack.baseUrl}${path}`, { method, headers, body });
    const text = await res.text();
    validator.assert(method, path, { status: res.status, headers: res.headers, body: text });
    seen.add(`${method} ${validator.templateOf(path)} ${res.status}`);
    return {
      status: res.status,
      headers: res.headers,
      raw: text,
      body:
        text && /json/.test(res.headers.get('content-type') ?? '')
          ? (JSON.parse(text) as Record<string, unknown>)
          : {},
    };
  }
  const operator = (method: string, path: string) => call(method, path, { as: 'operator' });

  const deadLetterRoutes = [
    ['GET', '/deadletters'],
    ['GET', `/deadletters/messages?entity=${queues.scheduler}`],
    ['POST', '/deadletters/redrive'],
    ['POST', '/deadletters/discard'],
  ];

  /** Operator routes are guarded in code; a caller without credentials meets the guard's 401. */
  const operatorRefusal = (res: { status: number; headers: Headers }) =>
    res.status === 401 &&
    /^Bearer\b/.test(res.headers.get('www-authenticate') ?? '') &&
    res.headers.get('content-type')?.startsWith('application/problem+json') === true;

  it('serves the generated document anonymously', async () => {
    const res = await call('GET', '/openapi.json', { as: 'nobody' });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, JSON.parse(JSON.stringify(openApiDocument())));
  });

  /**
   * Three kinds of route: "function" (the host checks the function key), "anonymous" (nobody
   * checks) and "operator" (anonymous at the host, guarded in code by requireOperator). The
   * registration side tells operator from anonymous by the guard's answer to a caller without
   * credentials; the document side by the operation's security requirement.
   */
  it("documents exactly the host's HTTP registrations, with their auth level", async () => {
    const registered: string[] = [];
    for (const f of stack.host()!.functions.filter((fn) => fn.trigger === 'http')) {
      const [, methods, url] = /^\[([^\]]+)\] (\S+)$/.exec(f.detail)!;
      const path = decodeURIComponent(new URL(url!).pathname).replace(/^\/api/, '');
      for (const method of methods!.split(',')) {
        let level = f.authLevel ?? 'missing';
        if (level === 'anonymous') {
          // Plain fetch: a drift shows as a drift below, not as an undocumented answer here.
          const probe = await fetch(`${stack.baseUrl}${path.replace(/\{[^}]+\}/g, randomUUID())}`, {
            method,
          });
          await probe.body?.cancel();
          if (operatorRefusal(probe)) level = 'operator';
        }
        registered.push(`${method} ${path} ${level}`);
      }
    }
    const documentedLevel = (op: OperationObject): string => {
      if (op.security === undefined) return 'function'; // the document-wide function-key requirement
      const schemes = op.security.flatMap((requirement) => Object.keys(requirement)).sort();
      if (schemes.length === 0) return 'anonymous';
      if (schemes.join() === 'operatorBearer') return 'operator';
      if (schemes.join() === 'functionKeyHeader,functionKeyQuery') return 'function';
      return `unknown(${schemes.join()})`;
    };
    const documentedOps = Object.entries(openApiDocument().paths)
      .flatMap(([path, ops]) =>
        Object.entries(ops).map(([method, op]) => `${method.toUpperCase()} ${path} ${documentedLevel(op)}`),
      )
      .sort();
    assert.deepEqual(documentedOps, registered.sort());
    assert.equal(
      documentedOps.filter((k) => k.endsWith(' operator')).length,
      19,
      "list, counts, changes, history, resubmit, cancel, retry, approval, bulk, hold, release, retention, service limits, the four dead-letter routes, the console and the console's order are the operator operations",
    );
  });

  it("without a credential: the host's 401 problem on client routes, the guard's 401 on operator routes", async () => {
    const id = randomUUID();
    for (const [method, path] of [
      ['POST', '/orders'],
      ['GET', `/orders/${id}`],
    ]) {
      const body = method === 'POST' ? { json: orderBody() } : {};
      const res = await call(method!, path!, { ...body, as: 'nobody' });
      assert.equal(res.status, 401, `${method} ${path}`);
      assert.match(String(res.body.detail), /function key/, `${method} ${path}`);
    }
    for (const [method, path] of [
      ['GET', '/orders?state=Pending'],
      ['POST', `/orders/${id}/resubmit`],
      ['POST', `/orders/${id}/cancel`],
      ...deadLetterRoutes,
      ['POST', `/orders/${id}/retry`],
      ['GET', `/orders/${id}/history`],
      ['GET', '/orders/counts'],
      ['GET', '/orders/changes'],
      ['POST', '/orders/bulk/cancel'],
      ['GET', '/services/limits'],
    ]) {
      const res = await call(method!, path!, { as: 'nobody' });
      assert.ok(operatorRefusal(res), `${method} ${path}: ${res.status} ${res.raw}`);
    }
  });

  it('operator routes answer 403 to a function key (header or ?code=), a client credential', async () => {
    const id = randomUUID();
    for (const [method, path] of [
      ['GET', '/orders?state=Pending'],
      ['POST', `/orders/${id}/resubmit`],
      ['POST', `/orders/${id}/cancel`],
      ...deadLetterRoutes,
      ['POST', `/orders/${id}/retry`],
      ['GET', `/orders/${id}/history`],
      ['GET', '/orders/counts'],
      ['GET', '/orders/changes'],
      ['POST', '/orders/bulk/cancel'],
      ['GET', '/services/limits'],
    ]) {
      const withHeader = await call(method!, path!);
      assert.equal(withHeader.status, 403, `${method} ${path}: ${withHeader.raw}`);
      assert.equal(withHeader.body.status, 403);
      const sep = path!.includes('?') ? '&' : '?';
      const withQuery = await call(method!, `${path}${sep}code=${stack.functionKey}`, { as: 'nobody' });
      assert.equal(withQuery.status, 403, `${method} ${path}?code=: ${withQuery.raw}`);
    }
  });

  it('submit: 202, 202 again for a replay, 400, 409, 413, 415', async () => {
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

  it("submit: 429 with Retry-After once a customer's burst passes its intake rate; nothing recorded", async () => {
    const customer = `burst-${randomUUID().slice(0, 8)}`;
    const keys = Array.from({ length: 90 }, () => randomUUID());
    const answers = await Promise.all(
      keys.map((key) =>
        call('POST', '/orders', {
          json: orderBody(['SKU-1'], customer),
          headers: { 'idempotency-key': key },
        }),
      ),
    );
    const refused = answers.filter((a) => a.status === 429);
    assert.ok(refused.length > 0, 'some of 90 orders at once were refused');
    assert.ok(answers.filter((a) => a.status === 202).length >= 10, 'a burst of the rate is taken');
    for (const a of refused) {
      assert.ok(Number(a.headers.get('retry-after')) >= 1);
      assert.match(String(a.body.type), /overloaded$/);
    }
    const refusedKey = keys[answers.findIndex((a) => a.status === 429)];
    const refusedId = orderIdFromIdempotencyKey(refusedKey);
    assert.equal(
      (await call('GET', `/orders/${refusedId}`)).status,
      404,
      'the refused order is not recorded',
    );
    assert.equal(
      (await call('POST', '/orders', { json: orderBody(), headers: { 'idempotency-key': randomUUID() } }))
        .status,
      202,
      "another customer's order is taken",
    );
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
      const p = await operator('GET', '/orders?state=processed&pageSize=1');
      return p.status === 200 && typeof p.body.next === 'string' ? p : undefined;
    });
    assert.equal((await operator('GET', (page.body.next as string).replace(/^\/api/, ''))).status, 200);
    assert.equal((await operator('GET', '/orders?state=Nope')).status, 400);
    assert.equal((await operator('GET', '/orders?state=Error&pageSize=0')).status, 400);
    assert.equal((await operator('GET', '/orders?state=Error&continuationToken=%21%21')).status, 400);
  });

  it('cancel: 202, then 409; 400 and 404', async () => {
    // Shipping hangs, so the order is still in flight when the cancel arrives.
    const placed = await call('POST', '/orders', { json: orderBody(['SKU-1', 'FAULT:shipping:hang:99']) });
    const id = placed.body.orderId as string;
    assert.equal((await operator('POST', `/orders/${id}/cancel?reason=asked`)).status, 202);
    assert.equal((await operator('POST', `/orders/${id}/cancel`)).status, 409);
    assert.equal((await operator('POST', '/orders/NOT-AN-ID/cancel')).status, 400);
    assert.equal((await operator('POST', `/orders/${randomUUID()}/cancel`)).status, 404);
  });

  it('retry, then resubmit: retry skips a back-off once (202, then 409); resubmit 409 unless in Error, 202 in Error; history records it all', async () => {
    const placed = await call('POST', '/orders', { json: orderBody(['SKU-1', 'FAULT:shipping:hang:99']) });
    const id = placed.body.orderId as string;
    assert.equal((await operator('POST', `/orders/${id}/resubmit`)).status, 409);
    // The first timeout puts the order into its 60 s back-off; retry skips it.
    await waitFor(
      'the order to wait out a back-off',
      async () => {
        const o = await call('GET', `/orders/${id}`);
        return o.body.processState === 'Pending' && (o.body.failureCount as number) >= 1;
      },
      120_000,
      300,
    );
    const retried = await operator('POST', `/orders/${id}/retry`);
    assert.equal(retried.status, 202, retried.raw);
    assert.equal((await operator('POST', `/orders/${id}/retry`)).status, 409, 'nothing left to skip');
    assert.equal((await operator('POST', '/orders/NOT-AN-ID/retry')).status, 400);
    assert.equal((await operator('POST', `/orders/${randomUUID()}/retry`)).status, 404);
    await waitFor(
      'the order to give up and end in Error',
      async () => (await call('GET', `/orders/${id}`)).body.processState === 'Error',
      120_000,
      500,
    );
    const resubmitted = await operator('POST', `/orders/${id}/resubmit`);
    assert.equal(resubmitted.status, 202);
    assert.equal(resubmitted.body.processState, 'Pending');
    assert.equal((await operator('POST', '/orders/NOT-AN-ID/resubmit')).status, 400);
    assert.equal((await operator('POST', `/orders/${randomUUID()}/resubmit`)).status, 404);

    const history = await operator('GET', `/orders/${id}/history?pageSize=1000`);
    assert.equal(history.status, 200);
    const events = (history.body.entries as Array<{ event: string; actor: string; by?: string }>).map(
      (e) => `${e.actor}:${e.event}`,
    );
    assert.equal(events[0], 'submission:OrderSubmitted');
    assert.ok(events.includes('supervisor:TimedOut'), events.join());
    assert.ok(events.includes('operator:OperatorRetry'), events.join());
    assert.equal(
      events.filter((e) => e === 'operator:OperatorRetry').length,
      1,
      'the refused retry is not recorded',
    );
    assert.ok(events.includes('operator:OperatorResubmit'), events.join());
    const paged = await operator('GET', `/orders/${id}/history?pageSize=2`);
    assert.equal((paged.body.entries as unknown[]).length, 2);
    assert.equal((await operator('GET', (paged.body.next as string).replace(/^\/api/, ''))).status, 200);
    assert.equal((await operator('GET', `/orders/${id}/history?pageSize=0`)).status, 400);
    assert.equal((await operator('GET', '/orders/NOT-AN-ID/history')).status, 400);
    assert.equal((await operator('GET', `/orders/${randomUUID()}/history`)).status, 404);
  });

  it('counts and changes: 200; changes 400 for a bad cursor', async () => {
    const start = await operator('GET', '/orders/changes');
    assert.equal(start.status, 200);
    assert.deepEqual(start.body.changes, []);
    const placed = await call('POST', '/orders', { json: orderBody() });
    const seenChange = await waitFor('the new order in the changes feed', async () => {
      const res = await operator('GET', `/orders/changes?after=${start.body.cursor as string}`);
      const changes = res.body.changes as Array<{ orderId: string }>;
      return changes.some((c) => c.orderId === placed.body.orderId) ? res : undefined;
    });
    assert.equal(seenChange.status, 200);
    assert.equal((await operator('GET', '/orders/changes?after=yesterday')).status, 400);
    const counts = await operator('GET', '/orders/counts');
    assert.equal(counts.status, 200);
    const c = counts.body.counts as Record<string, number>;
    assert.ok(Object.values(c).reduce((a, b) => a + b, 0) >= 1);
  });

  it('bulk: a preview, then the confirmed action per order; a second run gets 409 per order; 400, 409, 415', async () => {
    const customerId = `bulk-${randomUUID()}`;
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const placed = await call('POST', '/orders', {
        json: { ...orderBody(['SKU-1', 'FAULT:shipping:hang:99']), customerId },
      });
      ids.push(placed.body.orderId as string);
    }
    const filter = { state: 'Processing', customerId };
    await waitFor('both orders in Processing', async () => {
      const res = await operator('GET', `/orders?state=Processing&customerId=${customerId}`);
      return (res.body.orders as unknown[]).length === 2;
    });
    const bulk = (body: unknown) => call('POST', '/orders/bulk/cancel', { json: body, as: 'operator' });
    const preview = await bulk({ filter });
    assert.equal(preview.status, 200);
    assert.equal(preview.body.matched, 2);
    assert.deepEqual(new Set(preview.body.orderIds as string[]), new Set(ids));
    const confirm = preview.body.confirm as string;
    // Two operators confirm at once: each order is cancelled once, the other run gets 409 for it.
    const [a, b] = await Promise.all([bulk({ filter, confirm }), bulk({ filter, confirm })]);
    const statuses = [a, b].flatMap(
      (r) => (r.body.results as Array<{ orderId: string; status: number }>) ?? [],
    );
    for (const id of ids) {
      const mine = statuses.filter((r) => r.orderId === id);
      assert.equal(mine.filter((r) => r.status === 202).length, 1, JSON.stringify(statuses));
      assert.ok(
        mine.every((r) => r.status === 202 || r.status === 409),
        JSON.stringify(statuses),
      );
    }
    assert.equal((await bulk({ filter, confirm: `${Date.now() + 1000}.forged` })).status, 409);
    assert.equal((await bulk({ filter: { state: 'Nope' } })).status, 400);
    assert.equal(
      (await call('POST', '/orders/bulk/explode', { json: { filter }, as: 'operator' })).status,
      400,
    );
    assert.equal(
      (
        await call('POST', '/orders/bulk/cancel', {
          raw: 'x',
          headers: { 'content-type': 'text/plain' },
          as: 'operator',
        })
      ).status,
      415,
    );
  });

  it('dead letters: a poison message the host quarantines is listed, redriven to its queue (and quarantined again), discarded; 400, 413, 415', async () => {
    const orderId = randomUUID();
    const messageId = `poison-${orderId}`;
    const client = new ServiceBusClient(stack.serviceBus.connectionString);
    try {
      const sender = client.createSender(queues.scheduler);
      await sender.sendMessages({
        messageId,
        correlationId: orderId,
        body: { type: 'agent-reply', orderId, step: 'NOT A STEP' },
      });
      await sender.close();
    } finally {
      await client.close();
    }
    type Listed = {
      sequenceNumber: string;
      messageId: string;
      reason: string;
      orderId: string;
      origin: string | null;
    };
    // Quarantined on its first delivery: the poison queue's dead letters, named by where it came from.
    const deadLetterWithId = (id: string) =>
      waitFor(`${id} quarantined in poison's dead-letter queue`, async () => {
        const res = await operator('GET', `/deadletters/messages?entity=${queues.poison}&top=100`);
        assert.equal(res.status, 200);
        return (res.body.messages as Listed[]).find(
          (m) => m.messageId === `poison:${queues.scheduler}:${id}`,
        );
      });
    const first = await deadLetterWithId(messageId);
    assert.equal(first.reason, 'PoisonMessage');
    assert.equal(first.orderId, orderId);
    assert.equal(first.origin, queues.scheduler);
    const counts = await operator('GET', '/deadletters');
    assert.equal(counts.status, 200);

    const redrive = await call('POST', '/deadletters/redrive', {
      as: 'operator',
      json: { entity: queues.poison, sequenceNumbers: [first.sequenceNumber] },
    });
    assert.equal(redrive.status, 200);
    const [result] = redrive.body.results as Array<{ status: string; newMessageId: string }>;
    assert.equal(result!.status, 'redriven');
    // The copy goes back to the scheduler queue; the host fails it as it failed the original and
    // quarantines it again, under the copy's id.
    const again = await deadLetterWithId(result!.newMessageId);
    const discard = await call('POST', '/deadletters/discard', {
      as: 'operator',
      json: { entity: queues.poison, sequenceNumbers: [again.sequenceNumber, first.sequenceNumber] },
    });
    assert.deepEqual(
      (discard.body.results as Array<{ status: string }>).map((r) => r.status),
      ['discarded', 'not-found'],
    );

    assert.equal((await operator('GET', '/deadletters/messages?entity=nope')).status, 400);
    const bad = await call('POST', '/deadletters/redrive', {
      as: 'operator',
      json: { entity: queues.scheduler, sequenceNumbers: Array.from({ length: 101 }, (_, i) => String(i)) },
    });
    assert.equal(bad.status, 400);
    assert.equal(
      (
        await call('POST', '/deadletters/discard', {
          as: 'operator',
          json: { entity: 'nope', sequenceNumbers: ['1'] },
        })
      ).status,
      400,
    );
    for (const path of ['/deadletters/redrive', '/deadletters/discard']) {
      const big = { entity: queues.scheduler, sequenceNumbers: ['1'], padding: 'x'.repeat(70 * 1024) };
      assert.equal((await call('POST', path, { as: 'operator', json: big })).status, 413);
      const text = await call('POST', path, {
        as: 'operator',
        raw: 'x',
        headers: { 'content-type': 'text/plain' },
      });
      assert.equal(text.status, 415);
      const malformed = await call('POST', path, {
        as: 'operator',
        raw: '{',
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(malformed.status, 400);
    }
  });

  it('console: the page for an operator, the sign-in page (401) for a browser, 403 for a client key; assets; an order', async () => {
    const page = await operator('GET', '/console');
    assert.equal(page.status, 200);
    assert.match(page.raw, /<main id="app">/);
    const signIn = await call('GET', '/console', { as: 'nobody', headers: { accept: 'text/html' } });
    assert.equal(signIn.status, 401);
    assert.match(signIn.raw, /data-mode="key"/);
    assert.equal((await call('GET', '/console', { as: 'nobody' })).status, 401);
    assert.equal((await call('GET', '/console')).status, 403);
    for (const file of ['app.js', 'app.css']) {
      assert.equal((await call('GET', `/console/assets/${file}`, { as: 'nobody' })).status, 200);
    }
    assert.equal((await call('GET', '/console/assets/nope.js', { as: 'nobody' })).status, 404);
    const placed = await call('POST', '/orders', { json: orderBody() });
    const id = placed.body.orderId as string;
    const order = await operator('GET', `/console/orders/${id}`);
    assert.equal(order.status, 200);
    assert.equal(order.body.orderId, id);
    assert.equal((await operator('GET', '/console/orders/NOT-AN-ID')).status, 400);
    assert.equal((await operator('GET', `/console/orders/${randomUUID()}`)).status, 404);
    assert.equal((await call('GET', `/console/orders/${id}`, { as: 'nobody' })).status, 401);
    assert.equal((await call('GET', `/console/orders/${id}`)).status, 403);
  });

  it('the waiting-step routes: callbacks (token only) and an approval (operator)', async () => {
    const submit = async (unitPrice: number) => {
      const body = { ...orderBody(['SKU-1']), items: [{ sku: 'SKU-1', quantity: 1, unitPrice }] };
      const res = await call('POST', '/orders', { json: body, headers: { 'idempotency-key': randomUUID() } });
      assert.equal(res.status, 202);
      return String(res.body.orderId);
    };
    const view = async (id: string) =>
      (await call('GET', `/orders/${id}`)).body as { steps: Array<Record<string, unknown>> };
    // A callback the service "lost": the test sends it itself.
    stack.remote.payment.setFaults({ callbackLossRate: 1 });
    const paid = await submit(10);
    const url = await waitFor(
      'the payment service to accept',
      () =>
        stack.remote.payment.webhooks().find((w) => w.outcome === 'lost' && w.url.includes('/callbacks/'))
          ?.url,
    );
    stack.remote.payment.setFaults({});
    const path = url.slice(url.indexOf('/callbacks/'));
    const post = (p: string, body: unknown, raw?: string) =>
      call('POST', p, {
        as: 'nobody',
        ...(raw !== undefined ? { raw, headers: { 'content-type': 'application/json' } } : { json: body }),
      });
    await waitFor('payment to wait', async () =>
      (await view(paid)).steps.find((s) => s.name === 'payment' && s.waitingSince) ? true : undefined,
    );
    assert.equal((await post(`${path}/heartbeat`, { progress: 'half' })).status, 202);
    assert.equal((await post(`${path}/heartbeat`, { nope: 1 })).status, 400);
    assert.equal(
      (
        await call('POST', `${path}/heartbeat`, {
          as: 'nobody',
          raw: 'x',
          headers: { 'content-type': 'text/plain' },
        })
      ).status,
      415,
    );
    assert.equal((await post(`${path}/heartbeat`, { progress: 'x'.repeat(20_000) })).status, 413);
    assert.equal((await post(path, { outcome: 'succeeded', reference: 'ch' })).status, 202);
    assert.equal((await post(path, { outcome: 'succeeded' })).status, 200);
    assert.equal((await post(path, { outcome: 'failed', error: { message: 'no' } })).status, 409);
    assert.equal((await post(`${path}/heartbeat`, {})).status, 409);
    assert.equal((await post('/callbacks/cb1.x.y.z', { outcome: 'succeeded' })).status, 401);
    assert.equal((await post('/callbacks/cb1.x.y.z/heartbeat', {})).status, 401);
    assert.equal((await post(path, { outcome: 'perhaps' })).status, 400);
    assert.equal((await post(path, undefined, '{"outcome":')).status, 400);
    assert.equal(
      (await call('POST', path, { as: 'nobody', raw: 'x', headers: { 'content-type': 'text/plain' } }))
        .status,
      415,
    );
    assert.equal((await post(path, { outcome: 'succeeded', reference: 'r'.repeat(20_000) })).status, 413);

    const big = await submit(2000);
    await waitFor('approval to wait', async () =>
      (await view(big)).steps.find((s) => s.name === 'approval' && s.waitingSince) ? true : undefined,
    );
    const approval = (id: string, json: unknown, as: Caller = 'operator') =>
      call('POST', `/orders/${id}/approval`, { json, as });
    const decision = { decision: 'approve', reason: 'checked' };
    assert.equal((await approval(big, decision, 'nobody')).status, 401);
    assert.equal((await approval(big, decision, 'client')).status, 403);
    assert.equal((await approval('NOT-AN-ID', decision)).status, 400);
    assert.equal((await approval(big, { decision: 'maybe' })).status, 400);
    assert.equal((await approval(randomUUID(), decision)).status, 404);
    assert.equal((await approval(big, decision)).status, 202);
    assert.equal((await approval(big, decision)).status, 409);
  });

  it('retention: hold and release (200, 409, 404, 400), the readout, and a purged order: 410 to its resubmission, its archive to an operator', async () => {
    const key = randomUUID();
    const placed = await call('POST', '/orders', { json: orderBody(), headers: { 'idempotency-key': key } });
    const id = placed.body.orderId as string;
    // Held by the first round, released by the second.
    for (const action of ['hold', 'release'] as const) {
      const first = await operator(
        'POST',
        `/orders/${id}/${action}${action === 'hold' ? '?reason=audit' : ''}`,
      );
      assert.equal(first.status, 200, first.raw);
      assert.equal(first.body.held, action === 'hold');
      assert.equal((await operator('POST', `/orders/${id}/${action}`)).status, 409);
      assert.equal((await operator('POST', `/orders/${randomUUID()}/${action}`)).status, 404);
      assert.equal((await operator('POST', `/orders/NOT-AN-ID/${action}`)).status, 400);
      assert.equal((await call('POST', `/orders/${id}/${action}`, { as: 'nobody' })).status, 401);
      assert.equal((await call('POST', `/orders/${id}/${action}`)).status, 403);
    }
    const history = await operator('GET', `/orders/${id}/history`);
    const events = (history.body.entries as Array<{ event: string }>).map((e) => e.event);
    assert.ok(events.includes('LegalHoldPlaced') && events.includes('LegalHoldReleased'), events.join());
    const readout = await operator('GET', '/orders/retention');
    assert.equal(readout.status, 200);
    assert.equal(readout.body.orderRetentionDays, 90);
    assert.equal((await call('GET', '/orders/retention', { as: 'nobody' })).status, 401);
    assert.equal((await call('GET', '/orders/retention')).status, 403);

    await waitFor('the order to be Processed', async () => {
      const got = await call('GET', `/orders/${id}`);
      return got.body.processState === 'Processed' && got;
    });
    // The purge as the Supervisor would run it 100 days later, on the stack's own tables and container.
    const connection = {
      kind: 'connectionString' as const,
      connectionString: stack.azurite.connectionString,
    };
    const store = await StateStore.open(connection);
    const retention = await Retention.open(store, connection, { ...defaultRetention }, connection);
    assert.equal((await retention.purgeNow(new Date(Date.now() + 100 * 86_400_000), 500)).purged >= 1, true);

    const again = await call('POST', '/orders', { json: orderBody(), headers: { 'idempotency-key': key } });
    assert.equal(again.status, 410);
    assert.match(String(again.body.archive), /^order-archive\/orders\//);
    const archived = await operator('GET', `/console/orders/${id}`);
    assert.equal(archived.status, 200);
    assert.equal(archived.body.archived, true);
    assert.equal((archived.body.state as { processState: string }).processState, 'Processed');
    assert.equal((await call('GET', `/orders/${id}`)).status, 404, 'a client does not read the archive');
    // The lifecycle rule's archive tier: unreadable until rehydrated (409 archive-offline).
    const blob = retention.archive!.container.getBlockBlobClient(
      String(again.body.archive).slice('order-archive/'.length),
    );
    await blob.setAccessTier('Archive');
    for (const path of [`/orders/${id}`, `/console/orders/${id}`]) {
      // The client route passes the host's key check first: an operator who also holds the key.
      const offline = await call('GET', path, {
        as: 'operator',
        headers: path.startsWith('/orders') ? { 'x-functions-key': stack.functionKey } : {},
      });
      assert.equal(offline.status, 409, offline.raw);
      assert.match(String(offline.body.type), /archive-offline$/);
    }
    await blob.setAccessTier('Cool', { rehydratePriority: 'Standard' });
  });

  it('service limits: every Agent with its limits in force (settings override the declaration), one service, 400 for an unknown one', async () => {
    type Service = {
      service: string;
      limits: { maxCallsPerSecond: number | null; maxConcurrentCalls: number | null };
      rateInForce: number | null;
      waiting: number;
      pauses: number;
      outage: { open: boolean };
    };
    const all = await operator('GET', '/services/limits');
    assert.equal(all.status, 200, all.raw);
    assert.equal(all.headers.get('cache-control'), 'no-store');
    const services = all.body.services as Service[];
    assert.deepEqual(
      services.map((s) => s.service),
      ['inventory', 'payment', 'shipping'],
    );
    const payment = services.find((s) => s.service === 'payment')!;
    assert.deepEqual(payment.limits, { maxCallsPerSecond: 50, maxConcurrentCalls: null });
    assert.ok(payment.rateInForce !== null && payment.rateInForce <= 50, JSON.stringify(payment));
    const inventory = services.find((s) => s.service === 'inventory')!;
    assert.deepEqual(inventory.limits, { maxCallsPerSecond: null, maxConcurrentCalls: null });
    assert.equal(inventory.rateInForce, null);
    assert.equal(all.body.leaseSeconds, 5);

    const one = await operator('GET', '/services/limits?service=payment');
    assert.equal(one.status, 200);
    assert.deepEqual(
      (one.body.services as Service[]).map((s) => s.service),
      ['payment'],
    );
    for (const bad of ['nope', '', 'PAYMENT', 'x'.repeat(500)]) {
      const res = await operator('GET', `/services/limits?service=${encodeURIComponent(bad)}`);
      assert.equal(res.status, 400, `${bad.slice(0, 20)}: ${res.raw}`);
      assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.match(String(res.body.detail), /the services are inventory, payment, shipping/);
      assert.ok(String(res.body.detail).length < 300, 'the detail quotes at most 100 characters of the name');
    }
    assert.ok(operatorRefusal(await call('GET', '/services/limits', { as: 'nobody' })));
    assert.equal((await call('GET', '/services/limits')).status, 403);
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
