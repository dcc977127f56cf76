import { z } from 'zod';
import { processStates } from '../domain/state.js';
import { orderItemSchema, orderRequestSchema, shippingAddressSchema } from '../orders/orderRequest.js';
import {
  orderAcceptedSchema,
  orderIdSchema,
  orderListPageSchema,
  orderSummarySchema,
  orderViewSchema,
  processStateSchema,
  stepViewSchema,
} from '../orders/orderView.js';
import { consoleAssets } from './consoleApi.js';
import { maxBodyBytes } from './jsonBody.js';
import { operatorRole } from './operatorAuth.js';
import { fieldErrorSchema, problemDetailsSchema } from './problem.js';

/**
 * The OpenAPI 3.1 description of the HTTP API, built from the zod schemas that validate requests
 * and type responses, so the document cannot describe a body the code does not produce. Routes
 * are listed here rather than read from the registrations because the registrations know no
 * statuses; a drift test (test/api) keeps the two lists equal.
 */

export type JsonSchema = Record<string, unknown>;
export type OpenApiDocument = JsonSchema & {
  openapi: string;
  paths: Record<string, Record<string, OperationObject>>;
  components: { schemas: Record<string, JsonSchema> } & JsonSchema;
};
export interface OperationObject {
  operationId: string;
  responses: Record<string, ResponseObject>;
  security?: Array<Record<string, string[]>>;
  [field: string]: unknown;
}
export interface ResponseObject {
  description: string;
  headers?: Record<string, { $ref: string } | JsonSchema>;
  content?: Record<string, { schema: JsonSchema }>;
}

/** Where the host serves the document (the function's route under the `api` prefix). */
export const openApiRoute = 'openapi.json';

const componentRef = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** Request bodies are described as zod reads them (input), responses as the code writes them (output). */
const requestSchemas = {
  OrderRequest: orderRequestSchema,
  OrderItem: orderItemSchema,
  ShippingAddress: shippingAddressSchema,
};
const responseSchemas = {
  OrderAccepted: orderAcceptedSchema,
  OrderView: orderViewSchema,
  StepView: stepViewSchema,
  OrderListPage: orderListPageSchema,
  OrderSummary: orderSummarySchema,
  ProcessState: processStateSchema,
  OrderItem: orderItemSchema,
  ShippingAddress: shippingAddressSchema,
  Problem: problemDetailsSchema,
  FieldError: fieldErrorSchema,
};

function toComponents(
  schemas: Record<string, z.ZodType>,
  io: 'input' | 'output',
): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(schemas)) registry.add(schema, { id });
  const { schemas: out } = z.toJSONSchema(registry, {
    target: 'draft-2020-12',
    io,
    uri: (id) => `#/components/schemas/${id}`,
  });
  // Each would otherwise carry its own $schema and a fragment $id; the document's dialect covers them.
  return Object.fromEntries(
    Object.entries(out).map(([id, { $schema: _s, $id: _i, ...rest }]) => [id, rest as JsonSchema]),
  );
}

function inline(schema: z.ZodType): JsonSchema {
  const { $schema: _s, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' });
  return rest as JsonSchema;
}

function mergeComponents(...sets: Array<Record<string, JsonSchema>>): Record<string, JsonSchema> {
  const merged: Record<string, JsonSchema> = {};
  for (const set of sets) {
    for (const [id, schema] of Object.entries(set)) {
      if (id in merged && JSON.stringify(merged[id]) !== JSON.stringify(schema)) {
        throw new Error(`OpenAPI component ${id} differs between request and response use`);
      }
      merged[id] = schema;
    }
  }
  return merged;
}

const json = (schema: string, description: string, headers: string[] = []): ResponseObject => ({
  description,
  headers: Object.fromEntries(headers.map((h) => [h, { $ref: `#/components/headers/${h}` }])),
  content: { 'application/json': { schema: componentRef(schema) } },
});

const problem = (description: string, headers: string[] = []): ResponseObject => ({
  description,
  headers: Object.fromEntries(
    ['Cache-Control', ...headers].map((h) => [h, { $ref: `#/components/headers/${h}` }]),
  ),
  content: { 'application/problem+json': { schema: componentRef('Problem') } },
});

const failures: Record<string, ResponseObject> = {
  '500': problem('Unexpected failure; quote the invocationId when reporting it.'),
  '503': problem('A backing service is unavailable or busy; retry after Retry-After seconds.', [
    'Retry-After',
  ]),
};

/** What a client (function-key) route may answer besides its own statuses. */
const clientResponses: Record<string, ResponseObject> = {
  '401': {
    description:
      'No or wrong function key (`x-functions-key` header or `code` query). The host answers before the function runs, with an empty body.',
  },
  ...failures,
};

/**
 * What an operator route may answer besides its own statuses. The host lets these routes through
 * (`authLevel: 'anonymous'`); requireOperator answers 401 and 403 in code.
 */
const operatorResponses: Record<string, ResponseObject> = {
  '401': problem(
    'No operator signed in (and no function key sent). (A bearer token App Service Authentication cannot validate is refused by the platform before the function runs: 401 with an empty body and `WWW-Authenticate: Bearer error="invalid_token"`.)',
    ['WWW-Authenticate'],
  ),
  '403': problem(
    `A function key (a client credential, valid or not), or a signed-in principal without the ${operatorRole} app role.`,
  ),
  ...failures,
};

/** Operator operations: the operator's bearer credential, never the function key. */
const operatorSecurity = [{ operatorBearer: [] }];

const accepted = (description: string) =>
  json('OrderAccepted', description, ['Location', 'Retry-After', 'Cache-Control']);
const badOrderId = problem('The order id is not a lower-case UUID.');
const notFound = problem('No order with this id is recorded.');

const param = (name: string) => ({ $ref: `#/components/parameters/${name}` });

function operations(): Record<string, Record<string, OperationObject>> {
  return {
    '/orders': {
      post: {
        operationId: 'submitOrder',
        tags: ['orders'],
        summary: 'Submit an order',
        description:
          'Records the order and starts processing it. With an Idempotency-Key, a retry with the same key and body answers 202 for the same order again; the order id is derived from the key.',
        parameters: [param('IdempotencyKey'), param('ClientId')],
        requestBody: {
          required: true,
          description: `JSON (\`application/json\` or any \`application/*+json\`), at most ${maxBodyBytes} bytes. Unit prices have at most 2 decimal places.`,
          content: { 'application/json': { schema: componentRef('OrderRequest') } },
        },
        responses: {
          '202': accepted('Recorded (or the same order again, for a repeated Idempotency-Key and body).'),
          '400': problem(
            'Malformed JSON, invalid fields (listed in `errors` as JSON Pointers), an invalid Idempotency-Key or an invalid X-Client-Id.',
          ),
          '409': problem('The Idempotency-Key was already used with a different body.'),
          '413': problem(
            `The body is over ${maxBodyBytes} bytes. (Over the host's own limit, 1 MiB by default, the host answers 413 itself with an empty body.)`,
          ),
          '415': problem('The body is not JSON.'),
          ...clientResponses,
        },
      },
      get: {
        operationId: 'listOrders',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'List orders in one process state',
        description:
          'One page of the orders in a state, for operators. Follow `next` (or pass `continuationToken` back) for the next page.',
        parameters: [param('State'), param('PageSize'), param('ContinuationToken')],
        responses: {
          '200': json('OrderListPage', 'One page of orders.', ['Cache-Control']),
          '400': problem('Invalid state, pageSize or continuationToken.'),
          ...operatorResponses,
        },
      },
    },
    '/orders/{orderId}': {
      get: {
        operationId: 'getOrder',
        tags: ['orders'],
        summary: "Follow an order's processing",
        parameters: [param('OrderId')],
        responses: {
          '200': json('OrderView', "The order's recorded process state, step by step.", [
            'Cache-Control',
            'ETag',
          ]),
          '400': badOrderId,
          '404': notFound,
          ...clientResponses,
        },
      },
    },
    '/orders/{orderId}/resubmit': {
      post: {
        operationId: 'resubmitOrder',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'Resubmit an order in Error',
        description: 'After the operator fixed the cause: the order goes back to Pending and runs again.',
        parameters: [param('OrderId')],
        responses: {
          '202': accepted('The order is Pending again.'),
          '400': badOrderId,
          '404': notFound,
          '409': problem('Only an order in Error can be resubmitted; `processState` says where it is.'),
          ...operatorResponses,
        },
      },
    },
    '/orders/{orderId}/cancel': {
      post: {
        operationId: 'cancelOrder',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'Cancel an order',
        description: 'Compensates the steps that completed, in reverse order.',
        parameters: [param('OrderId'), param('CancelReason')],
        responses: {
          '202': accepted('Compensation has started.'),
          '400': badOrderId,
          '404': notFound,
          '409': problem('The order is already finished or being compensated; `processState` says which.'),
          ...operatorResponses,
        },
      },
    },
    '/console': {
      get: {
        operationId: 'getConsole',
        tags: ['operator'],
        security: operatorSecurity,
        summary: "The operator's console (an HTML page)",
        description:
          'The page for a signed-in operator. A browser without a sign-in (asking for `text/html`) gets the sign-in page with the 401: in Azure a link to the Entra ID login, locally a form for the operator key.',
        responses: {
          '200': {
            description: 'The console page; its script and style come from `/console/assets/`.',
            content: { 'text/html': { schema: { type: 'string' } } },
          },
          '401': {
            ...operatorResponses['401']!,
            content: {
              ...operatorResponses['401']!.content,
              'text/html': { schema: { type: 'string', description: 'The sign-in page.' } },
            },
          },
          '403': operatorResponses['403']!,
          ...failures,
        },
      },
    },
    '/console/assets/{file}': {
      get: {
        operationId: 'getConsoleAsset',
        tags: ['meta'],
        summary: "The console's script and style",
        description:
          'Built by `npm run build` from console/src. Anonymous like this document: code without data; every data request of the console goes to an operator route.',
        security: [],
        parameters: [
          {
            name: 'file',
            in: 'path',
            required: true,
            schema: inline(z.enum(Object.keys(consoleAssets) as [string, ...string[]])),
          },
        ],
        responses: {
          '200': {
            description: 'The file.',
            content: {
              'text/javascript': { schema: { type: 'string' } },
              'text/css': { schema: { type: 'string' } },
            },
          },
          '404': problem('No such file.'),
          ...failures,
        },
      },
    },
    '/console/orders/{orderId}': {
      get: {
        operationId: 'getOrderForOperator',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'One order, for an operator',
        description:
          "What `GET /orders/{orderId}` shows the order's client, for an operator (who holds no function key): the order page of the console reads it.",
        parameters: [param('OrderId')],
        responses: {
          '200': json('OrderView', "The order's recorded process state, step by step.", ['Cache-Control']),
          '400': badOrderId,
          '404': notFound,
          ...operatorResponses,
        },
      },
    },
    [`/${openApiRoute}`]: {
      get: {
        operationId: 'getOpenApiDocument',
        tags: ['meta'],
        summary: 'This document',
        security: [],
        responses: {
          '200': {
            description: 'The OpenAPI 3.1 document.',
            content: { 'application/json': { schema: { type: 'object' } } },
          },
        },
      },
    },
  };
}

function parameters(): JsonSchema {
  return {
    OrderId: {
      name: 'orderId',
      in: 'path',
      required: true,
      description: 'The id the 202 of the submission returned.',
      schema: inline(orderIdSchema),
    },
    IdempotencyKey: {
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description: 'Makes retries safe: the same key and body always name the same order.',
      schema: inline(z.string().regex(/^[!-~]{1,200}$/)),
    },
    ClientId: {
      name: 'X-Client-Id',
      in: 'header',
      required: false,
      description:
        'Scopes the Idempotency-Key to this caller when a function key is shared (ignored behind App Service Authentication, where the signed-in principal is the caller). Not authentication.',
      schema: inline(z.string().regex(/^[!-~]{1,128}$/)),
    },
    State: {
      name: 'state',
      in: 'query',
      required: true,
      description: 'The process state to list (case-insensitive).',
      schema: inline(z.enum(processStates)),
    },
    PageSize: {
      name: 'pageSize',
      in: 'query',
      required: false,
      schema: inline(z.number().int().min(1).max(100).default(50)),
    },
    ContinuationToken: {
      name: 'continuationToken',
      in: 'query',
      required: false,
      description: 'From the previous page, passed back as is.',
      schema: inline(z.string().regex(/^[A-Za-z0-9_\-.~+/=]{1,2048}$/)),
    },
    CancelReason: {
      name: 'reason',
      in: 'query',
      required: false,
      description: 'Recorded with the cancellation (the first 200 characters).',
      schema: inline(z.string()),
    },
  };
}

const headers: JsonSchema = {
  Location: {
    description: 'The status URL of the order.',
    required: true,
    schema: inline(z.url()),
  },
  'Retry-After': {
    description: 'Seconds to wait before polling (or retrying).',
    required: true,
    schema: inline(z.string().regex(/^[0-9]+$/)),
  },
  'Cache-Control': {
    description: 'The answer describes live state: never cached.',
    required: true,
    schema: inline(z.literal('no-store')),
  },
  ETag: {
    description: 'Changes whenever the order changes.',
    required: true,
    schema: inline(z.string().regex(/^"[^"]*"$/)),
  },
  'WWW-Authenticate': {
    description: 'The credential the route takes: an OAuth 2.0 bearer token (RFC 6750).',
    required: true,
    schema: inline(z.string().regex(/^Bearer\b/)),
  },
};

let built: OpenApiDocument | undefined;

/** The document (built once per process; it depends only on code). */
export function openApiDocument(): OpenApiDocument {
  built ??= {
    openapi: '3.1.0',
    info: {
      title: 'Order processing (Scheduler Agent Supervisor)',
      version: '1.0.0',
      summary: 'Submit orders, follow their processing, and let operators list, resubmit and cancel them.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: '/api', description: 'The function app (local host or Azure).' }],
    tags: [
      { name: 'orders', description: 'For clients: submit an order and follow it.' },
      { name: 'operator', description: 'For operators: find orders by state, resubmit or cancel them.' },
      { name: 'meta', description: 'About the API itself.' },
    ],
    security: [{ functionKeyHeader: [] }, { functionKeyQuery: [] }],
    paths: operations(),
    components: {
      schemas: mergeComponents(
        toComponents(requestSchemas, 'input'),
        toComponents(responseSchemas, 'output'),
      ),
      parameters: parameters(),
      headers,
      securitySchemes: {
        functionKeyHeader: {
          type: 'apiKey',
          in: 'header',
          name: 'x-functions-key',
          description: 'The function key (`npm start` prints it; in Azure, from the function app keys).',
        },
        functionKeyQuery: { type: 'apiKey', in: 'query', name: 'code', description: 'The function key.' },
        operatorBearer: {
          type: 'http',
          scheme: 'bearer',
          description: `For operator routes only (list, resubmit, cancel), which refuse a function key. In Azure: an Entra ID access token for the app, accepted by App Service Authentication, for a user or application assigned the ${operatorRole} app role. Locally: the operator key \`npm start\` prints (\`Authorization: Bearer <operator key>\`).`,
        },
      },
    },
  };
  return built;
}
