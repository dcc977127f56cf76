import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvocationContext } from '@azure/functions';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { withProblemErrors } from '../../shared/http/errors.js';
import { openApiDocument } from '../../shared/http/openapi.js';
import { problem, problemTypes } from '../../shared/http/problem.js';
import { orderRequestSchema } from '../../shared/orders/orderRequest.js';
import { documented, fromHandler, OpenApiValidator } from './openApiValidator.js';

/**
 * The document without a running app: its request schema says what zod says, the answers no
 * route test can provoke (500, 503) match it, and the validator the API tests lean on does fail
 * on each kind of deviation.
 */
const doc = openApiDocument();
const someId = '3f2b8c1e-5d4a-4b6c-9e7f-0a1b2c3d4e5f';
const accepted = {
  status: 202,
  headers: {
    Location: `http://127.0.0.1:7071/api/orders/${someId}`,
    'Retry-After': '2',
    'Cache-Control': 'no-store',
  },
  jsonBody: {
    orderId: someId,
    processState: 'Pending',
    statusUrl: `http://127.0.0.1:7071/api/orders/${someId}`,
  },
};
const context = () => new InvocationContext({ invocationId: 'inv-1', logHandler: () => undefined });

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1 with unique operation ids, function-key and operator security', () => {
    assert.equal(doc.openapi, '3.1.0');
    const ids = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((o) => o.operationId));
    assert.equal(new Set(ids).size, ids.length, ids.join(', '));
    assert.deepEqual(Object.keys(doc.components.securitySchemes as object).sort(), [
      'functionKeyHeader',
      'functionKeyQuery',
      'operatorBearer',
    ]);
  });

  it('publishes the request body schema zod validates with: the same bodies pass and fail', () => {
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    addFormats(ajv);
    ajv.addSchema({ ...doc, $id: 'https://openapi.invalid/doc.json' });
    const validate = ajv.compile({
      $ref: 'https://openapi.invalid/doc.json#/components/schemas/OrderRequest',
    });
    const good = {
      customerId: 'c-1',
      items: [{ sku: 'SKU-1', quantity: 2, unitPrice: 9.99 }],
      shippingAddress: {
        name: 'Ada',
        line1: 'Main St 1',
        city: 'Berlin',
        postalCode: '10115',
        country: 'DE',
      },
    };
    const samples: unknown[] = [
      good,
      { ...good, extra: 1 },
      { ...good, items: [] },
      { ...good, items: [{ sku: 'SKU-1', quantity: 0, unitPrice: 1 }] },
      { ...good, items: [{ sku: '-bad', quantity: 1, unitPrice: 1 }] },
      { ...good, shippingAddress: { ...good.shippingAddress, country: 'de' } },
      { ...good, shippingAddress: { ...good.shippingAddress, line2: 'Flat 3' } },
      { ...good, customerId: '' },
      { customerId: 'c-1', items: good.items },
      [],
      'text',
    ];
    for (const sample of samples) {
      assert.equal(
        validate(sample),
        orderRequestSchema.safeParse(sample).success,
        `document and zod disagree on ${JSON.stringify(sample)}`,
      );
    }
  });

  it('describes the 500 and 503 every route answers when something fails unexpectedly', async () => {
    const unavailable = await withProblemErrors(context(), async () => {
      throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    });
    assert.equal(unavailable.status, 503);
    const broken = await withProblemErrors(context(), async () => {
      throw new Error('a bug');
    });
    assert.equal(broken.status, 500);
    for (const [method, path] of [
      ['POST', '/orders'],
      ['GET', '/orders?state=Error'],
      ['GET', `/orders/${someId}`],
      ['POST', `/orders/${someId}/resubmit`],
      ['POST', `/orders/${someId}/cancel`],
    ] as const) {
      documented().assert(method, path, fromHandler(unavailable));
      documented().assert(method, path, fromHandler(broken));
    }
  });
});

describe('the response validator', () => {
  const v = documented();

  it('passes a documented answer', () => {
    v.assert('POST', '/orders', fromHandler(accepted));
    v.assert('POST', `http://127.0.0.1:7071/api/orders/${someId}/cancel`, fromHandler(accepted));
  });

  it('catches an undocumented status, operation, media type, body field and missing header', () => {
    const teapot = problem(418, problemTypes.conflict, 'Teapot');
    assert.match(
      v.deviations('GET', `/orders/${someId}`, fromHandler(teapot)).join(),
      /status 418 is not documented/,
    );
    assert.match(
      v.deviations('DELETE', `/orders/${someId}`, fromHandler(accepted)).join(),
      /no documented operation/,
    );
    assert.match(
      v
        .deviations('POST', '/orders', {
          ...fromHandler(accepted),
          headers: { ...fromHandler(accepted).headers, 'content-type': 'text/plain' },
        })
        .join(),
      /content type "text\/plain" is not one of application\/json/,
    );
    const extra = fromHandler({ ...accepted, jsonBody: { ...accepted.jsonBody, secret: 'x' } });
    assert.match(v.deviations('POST', '/orders', extra).join(), /must NOT have additional properties/);
    const noLocation = fromHandler({
      ...accepted,
      headers: { 'Retry-After': '2', 'Cache-Control': 'no-store' },
    });
    assert.match(v.deviations('POST', '/orders', noLocation).join(), /required header Location is missing/);
    const soon = fromHandler({ ...accepted, headers: { ...accepted.headers, 'Retry-After': 'soon' } });
    assert.match(
      v.deviations('POST', '/orders', soon).join(),
      /header Retry-After="soon": data must match pattern/,
    );
    const badState = fromHandler({ ...accepted, jsonBody: { ...accepted.jsonBody, processState: 'Done' } });
    assert.match(
      v.deviations('POST', '/orders', badState).join(),
      /must be equal to one of the allowed values/,
    );
    // Every answer of ours has a body now; a response documented without one still judges bodies.
    const bodiless = structuredClone(doc);
    delete bodiless.paths['/orders/{orderId}']!.get!.responses['401']!.content;
    assert.match(
      new OpenApiValidator(bodiless)
        .deviations('GET', `/orders/${someId}`, { status: 401, headers: {}, body: 'no' })
        .join(),
      /documented without a body/,
    );
    assert.match(
      v.deviations('GET', `/orders/${someId}`, { status: 401, headers: {}, body: '' }).join(),
      /content type null is not one of application\/problem\+json/,
    );
  });

  it('judges by the document it is given: a status removed from the document becomes a deviation', () => {
    const trimmed = structuredClone(doc);
    delete trimmed.paths['/orders/{orderId}/cancel']!.post!.responses['409'];
    const conflict = problem(409, problemTypes.invalidState, 'Not allowed in this state', 'finished', {
      processState: 'Processed',
    });
    assert.deepEqual(v.deviations('POST', `/orders/${someId}/cancel`, fromHandler(conflict)), []);
    assert.match(
      new OpenApiValidator(trimmed)
        .deviations('POST', `/orders/${someId}/cancel`, fromHandler(conflict))
        .join(),
      /status 409 is not documented for POST \/orders\/\{orderId\}\/cancel/,
    );
  });
});
