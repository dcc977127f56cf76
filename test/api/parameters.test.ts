import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { HttpRequest, InvocationContext, type HttpResponseInit } from '@azure/functions';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import type { Dependencies } from '../../shared/app/ports.js';
import { makePolicy, orderWorkflowVersions, systemClock } from '../../shared/domain/index.js';
import { getOrder, listOrders, submitOrder } from '../../shared/http/orderApi.js';
import { openApiDocument } from '../../shared/http/openapi.js';
import { StateStore } from '../../shared/stateStore/index.js';
import { behindPlatformAuth, principalHeaders } from '../http/principal.js';

/**
 * The query, path and header parameters are checked by hand in orderApi.ts, not by zod, so their
 * documented schemas are a second statement of the same rules. Here both judge the same values
 * and must agree, except where the document knowingly cannot say more (listed with the reason).
 */
const doc = openApiDocument();
// Query and header values arrive as text; coercion lets "50" meet `type: integer` as a client sees it.
const ajv = new Ajv2020({ strict: false, coerceTypes: true });
addFormats(ajv);
ajv.addSchema({ ...doc, $id: 'https://openapi.invalid/parameters.json' });
const documentAccepts = (parameter: string, value: string) =>
  ajv.validate(
    { $ref: `https://openapi.invalid/parameters.json#/components/parameters/${parameter}/schema` },
    value,
  );

describe('documented parameters agree with the handlers', () => {
  let azurite: AzuriteInstance;
  let deps: Dependencies;

  before(async () => {
    azurite = await startAzurite({ services: ['table'] });
    const store = await StateStore.open(
      { kind: 'connectionString', connectionString: azurite.connectionString },
      { ordersTable: 'OrdersParams', inFlightTable: 'InFlightParams' },
    );
    // Only the state store is reached on these paths (reads); no message is ever sent.
    deps = {
      store,
      bus: undefined as unknown as Dependencies['bus'],
      clock: systemClock,
      policy: makePolicy({
        stepTimeoutSeconds: 60,
        failureSoftThreshold: 3,
        failureHardThreshold: 5,
        extendedBackoffSeconds: 60,
      }),
      workflows: orderWorkflowVersions,
    };
  });
  after(async () => {
    await azurite?.stop();
  });

  const context = () => new InvocationContext({ invocationId: 'params', logHandler: () => undefined });
  const call = (
    handler: (d: Dependencies, r: HttpRequest, c: InvocationContext) => Promise<HttpResponseInit>,
    init: {
      method: string;
      path: string;
      query?: Record<string, string>;
      headers?: Record<string, string>;
      params?: Record<string, string>;
      body?: string;
    },
  ) => {
    const url = new URL(`http://127.0.0.1/api${init.path}`);
    for (const [k, v] of Object.entries(init.query ?? {})) url.searchParams.set(k, v);
    return handler(
      deps,
      new HttpRequest({
        method: init.method,
        url: url.toString(),
        headers: init.headers,
        params: init.params,
        query: init.query,
        body: init.body === undefined ? undefined : { string: init.body },
      }),
      context(),
    );
  };
  /** The list is an operator route: its guard runs first, so it is called as a signed-in operator. */
  const list = (query: Record<string, string>) =>
    behindPlatformAuth(() =>
      call(listOrders, { method: 'GET', path: '/orders', query, headers: principalHeaders() }),
    );
  /** True unless the handler refused this very parameter (its 400 names it). */
  const handlerAccepts = async (answer: Promise<HttpResponseInit>, title: string) => {
    const res = await answer;
    // A refused credential would otherwise pass for an accepted value.
    assert.ok(res.status !== 401 && res.status !== 403, `the handler refused the caller: ${res.status}`);
    if (res.status !== 400) return true;
    return !String(res.body).includes(`"title":"${title}"`);
  };

  async function agree(parameter: string, values: string[], handler: (v: string) => Promise<boolean>) {
    const disagreements: string[] = [];
    for (const value of values) {
      const documented = documentAccepts(parameter, value);
      const handled = await handler(value);
      if (documented !== handled)
        disagreements.push(`${JSON.stringify(value)}: document ${documented}, handler ${handled}`);
    }
    assert.deepEqual(disagreements, [], parameter);
  }

  it('state', async () => {
    const listState = (state: string) => handlerAccepts(list({ state }), 'Invalid state');
    await agree(
      'State',
      ['Pending', 'Processing', 'Processed', 'Compensating', 'Compensated', 'Error', 'Nope', ''],
      listState,
    );
    // Known: the handler also takes other letter cases; the document names the canonical spelling.
    assert.equal(await listState('error'), true);
    assert.equal(documentAccepts('State', 'error'), false);
  });

  it('pageSize', async () => {
    await agree('PageSize', ['1', '50', '100', '0', '101', '-1', '1.5', 'abc'], (pageSize) =>
      handlerAccepts(list({ state: 'Pending', pageSize }), 'Invalid pageSize'),
    );
  });

  it('continuationToken', async () => {
    const token = Buffer.from(JSON.stringify({ nextPartitionKey: 'a', nextRowKey: 'b' })).toString('base64');
    const listFrom = (continuationToken: string) =>
      handlerAccepts(list({ state: 'Pending', continuationToken }), 'Invalid continuationToken');
    await agree('ContinuationToken', [token, '!!', 'a b', 'x'.repeat(2049)], listFrom);
    // Known: the token is opaque in the document; that it must be one this API handed out is
    // checked by the handler alone.
    assert.equal(await listFrom('abc'), false);
    assert.equal(documentAccepts('ContinuationToken', 'abc'), true);
  });

  it('orderId', async () => {
    await agree(
      'OrderId',
      [
        '3f2b8c1e-5d4a-4b6c-9e7f-0a1b2c3d4e5f',
        '3F2B8C1E-5D4A-4B6C-9E7F-0A1B2C3D4E5F',
        '00000000-0000-0000-0000-000000000000',
        'not-an-id',
      ],
      (orderId) =>
        handlerAccepts(
          call(getOrder, { method: 'GET', path: `/orders/${orderId}`, params: { orderId } }),
          'Invalid order id',
        ),
    );
  });

  it('Idempotency-Key', async () => {
    await agree(
      'IdempotencyKey',
      ['k-1', 'x'.repeat(200), 'x'.repeat(201), 'has space', 'caf\u00e9', ''],
      (key) =>
        // An invalid body stops the request before anything is written, whatever the key.
        handlerAccepts(
          call(submitOrder, {
            method: 'POST',
            path: '/orders',
            headers: { 'idempotency-key': key, 'content-type': 'application/json' },
            body: '{}',
          }),
          'Invalid Idempotency-Key',
        ),
    );
  });

  it('X-Client-Id', async () => {
    await agree(
      'ClientId',
      ['client-a', 'x'.repeat(128), 'x'.repeat(129), 'has space', 'caf\u00e9', ''],
      (clientId) =>
        handlerAccepts(
          call(submitOrder, {
            method: 'POST',
            path: '/orders',
            headers: { 'x-client-id': clientId, 'content-type': 'application/json' },
            body: '{}',
          }),
          'Invalid X-Client-Id',
        ),
    );
  });
});
