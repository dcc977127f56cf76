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
import {
  deadLetterActionSchema,
  deadLetterCountsSchema,
  deadLetterEntityNames,
  deadLetterMessageSchema,
  deadLetterPageSchema,
  deadLetterResultsSchema,
  maxSequenceNumbers,
  maxTop,
} from './deadLetterApi.js';
import {
  bulkFilterSchema,
  bulkPreviewSchema,
  bulkRequestSchema,
  bulkResultSchema,
  historyEntrySchema,
  historyPageSchema,
  orderChangesSchema,
  orderCountsSchema,
} from '../orders/operatorViews.js';
import { archivedOrderViewSchema, holdViewSchema, retentionReadoutSchema } from '../orders/retentionViews.js';
import { serviceLimitSchema, serviceLimitsSchema } from '../orders/serviceLimitViews.js';
import { consoleAssets } from './consoleApi.js';
import {
  approvalBodySchema,
  callbackAnswerSchema,
  callbackBodySchema,
  heartbeatBodySchema,
  maxCallbackBytes,
} from '../callbacks/schemas.js';
import { maxBodyBytes } from './jsonBody.js';
import { operatorRole } from './operatorAuth.js';
import { submissionLineWaiting } from './submissionLine.js';
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
  DeadLetterAction: deadLetterActionSchema,
  BulkRequest: bulkRequestSchema,
  BulkFilter: bulkFilterSchema,
  CallbackBody: callbackBodySchema,
  HeartbeatBody: heartbeatBodySchema,
  ApprovalDecision: approvalBodySchema,
};
const responseSchemas = {
  HistoryPage: historyPageSchema,
  HistoryEntry: historyEntrySchema,
  OrderCounts: orderCountsSchema,
  OrderChanges: orderChangesSchema,
  BulkPreview: bulkPreviewSchema,
  BulkResult: bulkResultSchema,
  OrderAccepted: orderAcceptedSchema,
  OrderView: orderViewSchema,
  ArchivedOrderView: archivedOrderViewSchema,
  HoldView: holdViewSchema,
  RetentionReadout: retentionReadoutSchema,
  ServiceLimits: serviceLimitsSchema,
  ServiceLimit: serviceLimitSchema,
  StepView: stepViewSchema,
  OrderListPage: orderListPageSchema,
  OrderSummary: orderSummarySchema,
  ProcessState: processStateSchema,
  OrderItem: orderItemSchema,
  ShippingAddress: shippingAddressSchema,
  Problem: problemDetailsSchema,
  FieldError: fieldErrorSchema,
  DeadLetterCounts: deadLetterCountsSchema,
  DeadLetterPage: deadLetterPageSchema,
  DeadLetterMessage: deadLetterMessageSchema,
  DeadLetterResults: deadLetterResultsSchema,
  CallbackAnswer: callbackAnswerSchema,
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
  '401': problem(
    "No or wrong function key (`x-functions-key` header or `code` query), refused before the function runs: the local host answers this problem; in Azure the Functions host answers itself, with an empty body (not under the app's control).",
  ),
  ...failures,
};

/**
 * What an operator route may answer besides its own statuses. The host lets these routes through
 * (`authLevel: 'anonymous'`); requireOperator answers 401 and 403 in code.
 */
const operatorResponses: Record<string, ResponseObject> = {
  '401': problem(
    'No operator signed in (and no function key sent). A bearer token that cannot be validated is refused before the function runs, with `WWW-Authenticate: Bearer error="invalid_token"`: locally as this problem; in Azure by App Service Authentication, with an empty body (not under the app\'s control).',
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

/** A redrive or a discard: the same request and answers, another action. */
function deadLetterAction(
  operationId: string,
  summary: string,
  description: string,
): Record<string, OperationObject> {
  return {
    post: {
      operationId,
      tags: ['operator'],
      security: operatorSecurity,
      summary,
      description,
      requestBody: {
        required: true,
        description: `JSON, at most ${maxSequenceNumbers} sequence numbers.`,
        content: { 'application/json': { schema: componentRef('DeadLetterAction') } },
      },
      responses: {
        '200': json('DeadLetterResults', 'One result per sequence number.', ['Cache-Control']),
        '400': problem(
          'Malformed JSON, an unknown entity, or invalid sequence numbers (listed in `errors`).',
        ),
        '413': problem(`The body is over ${maxBodyBytes} bytes.`),
        '415': problem('The body is not JSON.'),
        ...operatorResponses,
      },
    },
  };
}

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
          '410': problem(
            "The Idempotency-Key's order finished and was purged under the retention policy (problem type `order-purged`, `archive` names its archive blob). Nothing new was recorded; use a new key for a new order.",
          ),
          '413': problem(
            `The body is over ${maxBodyBytes} bytes. (Over the host's own limit, 1 MiB by default, the host answers 413 itself with an empty body.)`,
          ),
          '415': problem('The body is not JSON.'),
          '429': problem(
            "Too many orders from this customer right now (problem type `overloaded`): this one's turn is further out than CUSTOMER_INTAKE_MAX_WAIT_SECONDS (its orders are taken CUSTOMER_INTAKE_PER_SECOND a second per instance), or the instance already has CUSTOMER_SUBMISSIONS_AT_ONCE of its submissions in progress and " +
              String(submissionLineWaiting) +
              ' more waiting. Nothing was recorded; retry after Retry-After seconds with the same Idempotency-Key.',
            ['Retry-After'],
          ),
          ...clientResponses,
          '503': problem(
            'Not accepted now: the Schedulers are behind (problem type `overloaded`, see ADMISSION_BACKLOG_LIMIT_SECONDS) or a backing service is busy. Nothing was recorded; retry after Retry-After seconds with the same Idempotency-Key.',
            ['Retry-After'],
          ),
        },
      },
      get: {
        operationId: 'listOrders',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'List orders in one process state',
        description:
          'One page of the orders in a state, newest state change first, for operators, from the state index (a page reads what it shows). Narrow by workflow version, customer and the time the order entered the state. Follow `next` (or pass `continuationToken` back) for the next page.',
        parameters: [
          param('State'),
          param('WorkflowVersion'),
          param('CustomerId'),
          param('From'),
          param('To'),
          param('PageSize'),
          param('ContinuationToken'),
        ],
        responses: {
          '200': json('OrderListPage', 'One page of orders.', ['Cache-Control']),
          '400': problem('Invalid state, filter, pageSize or continuationToken.'),
          ...operatorResponses,
        },
      },
    },
    '/orders/{orderId}': {
      get: {
        operationId: 'getOrder',
        tags: ['orders'],
        summary: "Follow an order's processing",
        description:
          "A client reads the orders of its own caller scope (the X-Client-Id it submitted with, or its signed-in principal behind App Service Authentication); another caller's order answers 404 like an unknown id. A signed-in operator reads every order.",
        parameters: [param('OrderId'), param('ClientId')],
        responses: {
          '200': {
            description:
              "The order's recorded process state, step by step; for an operator, a purged order's archive document, marked `archived`.",
            headers: Object.fromEntries(
              ['Cache-Control', 'ETag'].map((h) => [h, { $ref: `#/components/headers/${h}` }]),
            ),
            content: {
              'application/json': {
                schema: { oneOf: [componentRef('OrderView'), componentRef('ArchivedOrderView')] },
              },
            },
          },
          '400': problem('The order id is not a lower-case UUID, or the X-Client-Id is invalid.'),
          '404': problem("No order with this id is recorded for this caller (unknown, or another caller's)."),
          '409': problem(
            'For an operator, a purged order whose archive blob is in the archive tier (problem type `archive-offline`, `archive` names the blob): rehydrate it (hours), then ask again.',
          ),
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
    '/orders/{orderId}/approval': {
      post: {
        operationId: 'orderApproval',
        tags: ['operator'],
        security: operatorSecurity,
        summary: "Decide an order's approval step",
        description:
          'An order on a workflow version with an approval step (order@2: orders above 1,000) waits for an operator. `approve` goes on to the next step; `refuse` undoes the order like a business refusal. Who and why go to the history (ApprovalDecided).',
        parameters: [param('OrderId')],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: componentRef('ApprovalDecision') } },
        },
        responses: {
          '202': accepted('Decided; the order goes on (or is being undone).'),
          '400': problem('The order id or the body is invalid.'),
          '404': notFound,
          '409': problem('The order is not waiting for an approval; `processState` says where it is.'),
          ...operatorResponses,
        },
      },
    },
    ...callbackPaths(),
    '/deadletters': {
      get: {
        operationId: 'deadLetterCounts',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'Dead letters per queue and subscription',
        description:
          'How many messages each queue and each `order-status` subscription has dead-lettered (counted by peeking, up to 1,000 each).',
        responses: {
          '200': json('DeadLetterCounts', 'One count per entity.', ['Cache-Control']),
          ...operatorResponses,
        },
      },
    },
    '/deadletters/messages': {
      get: {
        operationId: 'deadLetterMessages',
        tags: ['operator'],
        security: operatorSecurity,
        summary: "One entity's dead letters",
        description:
          'The oldest dead letters of a queue or subscription (peeked: nothing is locked or changed), with the reason Service Bus or the app gave, the order they name and their body.',
        parameters: [param('DeadLetterEntity'), param('Top')],
        responses: {
          '200': json('DeadLetterPage', 'The dead letters, oldest first.', ['Cache-Control']),
          '400': problem('Unknown entity or invalid top.'),
          ...operatorResponses,
        },
      },
    },
    '/deadletters/redrive': deadLetterAction(
      'redriveDeadLetters',
      'Send dead letters back',
      "Sends a copy of each chosen dead letter, with a new message id, to its queue (a subscription's copy goes to the topic, with `redrivenFor` naming the subscription), then removes the dead letter and records the redrive in the order's history. Redriving the same dead letter twice sends one copy.",
    ),
    '/deadletters/discard': deadLetterAction(
      'discardDeadLetters',
      'Discard dead letters',
      "Removes each chosen dead letter and records the discard in the order's history.",
    ),
    '/orders/{orderId}/retry': {
      post: {
        operationId: 'retryOrder',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'Retry a Pending order now',
        description:
          'Skips the back-off of a Pending order: its claim is sent now. Once: a second call is a 409.',
        parameters: [param('OrderId')],
        responses: {
          '202': accepted('The claim is on its way.'),
          '400': badOrderId,
          '404': notFound,
          '409': problem('Nothing to retry now: the order is not Pending, or not waiting out a back-off.'),
          ...operatorResponses,
        },
      },
    },
    '/orders/{orderId}/history': {
      get: {
        operationId: 'getOrderHistory',
        tags: ['operator'],
        security: operatorSecurity,
        summary: "An order's history",
        description:
          'Every transition (and operator action, and dead-letter redrive or discard) of the order, oldest first, one page at a time.',
        parameters: [param('OrderId'), param('HistoryPageSize'), param('ContinuationToken')],
        responses: {
          '200': json('HistoryPage', 'One page of history entries.', ['Cache-Control']),
          '400': problem('Invalid order id, pageSize or continuationToken.'),
          '404': notFound,
          ...operatorResponses,
        },
      },
    },
    '/orders/{orderId}/hold': {
      post: {
        operationId: 'holdOrder',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'Place a legal hold on an order',
        description:
          'Retention skips the order (it is neither archived nor purged) until the hold is released. Recorded in its history with who placed it.',
        parameters: [param('OrderId'), param('HoldReason')],
        responses: {
          '200': json('HoldView', 'The order is held.', ['Cache-Control']),
          '400': badOrderId,
          '404': notFound,
          '409': problem('The order is already held.'),
          ...operatorResponses,
        },
      },
    },
    '/orders/{orderId}/release': {
      post: {
        operationId: 'releaseOrder',
        tags: ['operator'],
        security: operatorSecurity,
        summary: "Release an order's legal hold",
        description: 'The order is subject to retention again. Recorded in its history with who released it.',
        parameters: [param('OrderId')],
        responses: {
          '200': json('HoldView', 'The order is no longer held.', ['Cache-Control']),
          '400': badOrderId,
          '404': notFound,
          '409': problem('The order is not held.'),
          ...operatorResponses,
        },
      },
    },
    '/orders/retention': {
      get: {
        operationId: 'getRetention',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'Retention at a glance',
        description:
          'The oldest retained terminal order, how many are past ORDER_RETENTION_DAYS and wait for the purge (counted up to 10,000), the last purge slice, and the held orders (up to 100). A few range reads of the state index, whatever the history.',
        responses: {
          '200': json('RetentionReadout', 'The readout.', ['Cache-Control']),
          ...operatorResponses,
        },
      },
    },
    '/services/limits': {
      get: {
        operationId: 'getServiceLimits',
        tags: ['operator'],
        security: operatorSecurity,
        summary: "The remote services' call limits",
        description:
          'Per remote service: the global limits in force, the rate allowed now, the calls started, the requests waiting for a call slot and the oldest of them, the pauses on 429/503, and the outage tracking. Two point reads per service (its lease row and its health row).',
        parameters: [param('ServiceName')],
        responses: {
          '200': json('ServiceLimits', 'The readout.', ['Cache-Control']),
          '400': problem('No Agent calls a service of that name.'),
          ...operatorResponses,
        },
      },
    },
    '/orders/counts': {
      get: {
        operationId: 'getOrderCounts',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'Orders per state',
        description:
          'From counters kept with the state index (no scan); they follow each state change right after it commits. Also the order longest in an in-flight state.',
        responses: {
          '200': json('OrderCounts', 'Counts per state.', ['Cache-Control']),
          ...operatorResponses,
        },
      },
    },
    '/orders/changes': {
      get: {
        operationId: 'getOrderChanges',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'What changed since a cursor',
        description:
          'Orders whose process state changed after `after` (the cursor of the previous answer), oldest first, at most 200; reads O(changes). Without `after`: no changes and the current cursor.',
        parameters: [param('After')],
        responses: {
          '200': json('OrderChanges', 'Changes and the next cursor.', ['Cache-Control']),
          '400': problem('Invalid cursor.'),
          ...operatorResponses,
        },
      },
    },
    '/orders/bulk/{action}': {
      post: {
        operationId: 'bulkOrderAction',
        tags: ['operator'],
        security: operatorSecurity,
        summary: 'Resubmit, cancel or retry every order a filter matches',
        description:
          'Without `confirm`: what the action would touch and a confirmation token (valid 5 minutes for this action, filter and limit); nothing changes. With it: the action on each order that matches now, at a bounded rate (OPERATOR_BULK_RATE_PER_SECOND), answered per order. Two runs over the same orders act once: the second gets 409 per order.',
        parameters: [param('BulkAction')],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: componentRef('BulkRequest') } },
        },
        responses: {
          '200': {
            description: 'The preview (without `confirm`) or the result per order (with it).',
            headers: { 'Cache-Control': { $ref: '#/components/headers/Cache-Control' } },
            content: {
              'application/json': {
                schema: { oneOf: [componentRef('BulkPreview'), componentRef('BulkResult')] },
              },
            },
          },
          '400': problem('Unknown action, malformed JSON or invalid fields.'),
          '409': problem('The confirmation token expired or was issued for another request.'),
          '415': problem('The body is not JSON.'),
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
          '200': {
            description:
              "The order's recorded process state, step by step; a purged order's archive document, marked `archived`.",
            headers: { 'Cache-Control': { $ref: '#/components/headers/Cache-Control' } },
            content: {
              'application/json': {
                schema: { oneOf: [componentRef('OrderView'), componentRef('ArchivedOrderView')] },
              },
            },
          },
          '400': badOrderId,
          '404': notFound,
          '409': problem(
            'A purged order whose archive blob is in the archive tier (problem type `archive-offline`, `archive` names the blob): rehydrate it (hours), then ask again.',
          ),
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

/**
 * The routes a remote service calls back on. No function key, no operator: the token in the path
 * (signed, bound to order, step, run and attempt, expiring) is the only credential.
 */
function callbackPaths(): Record<string, Record<string, OperationObject>> {
  const token = {
    name: 'token',
    in: 'path',
    required: true,
    description:
      "The callback token from the `callbackUrl` the Agent passed with the request (the URL is used as given; it is the service's only credential).",
    schema: { type: 'string', maxLength: 1024 },
  };
  const refused = problem(
    'The token is forged, altered, signed by a key no longer held, or expired (complete-by plus the grace has passed). Nothing changed.',
  );
  const movedOn = problem(
    "The attempt the token names is no longer current (timed out and retried, cancelled, another outcome recorded): the answer is written to the order's history and changes nothing.",
  );
  return {
    '/callbacks/{token}': {
      post: {
        operationId: 'stepCallback',
        tags: ['callbacks'],
        security: [],
        summary: "A waiting step's outcome, from the service that accepted the work",
        description:
          'A service that answered the Agent 202 POSTs the outcome here when the work is done. Deliver at least once: retry on 5xx and network errors; 200, 202, 401 and 409 are final.',
        parameters: [token],
        requestBody: {
          required: true,
          description: `JSON, at most ${maxCallbackBytes} bytes.`,
          content: { 'application/json': { schema: componentRef('CallbackBody') } },
        },
        responses: {
          '202': json('CallbackAnswer', 'Applied: the step is done (or refused) and the order goes on.', [
            'Cache-Control',
          ]),
          '200': json('CallbackAnswer', 'A duplicate: this outcome of this attempt is recorded already.', [
            'Cache-Control',
          ]),
          '400': problem('The body is not a callback (see CallbackBody).'),
          '401': refused,
          '409': movedOn,
          '413': problem(`The body is larger than ${maxCallbackBytes} bytes.`),
          '415': problem('The body is not JSON.'),
          ...failures,
        },
      },
    },
    '/callbacks/{token}/heartbeat': {
      post: {
        operationId: 'stepHeartbeat',
        tags: ['callbacks'],
        security: [],
        summary: 'Progress of a waiting step: moves its complete-by forward',
        description:
          'For a step that declares heartbeats: complete-by moves to the heartbeat interval from now, never past the declared maximum. A step whose heartbeats stop times out at its heartbeat deadline. The body is optional.',
        parameters: [token],
        requestBody: {
          required: false,
          content: { 'application/json': { schema: componentRef('HeartbeatBody') } },
        },
        responses: {
          '202': json('CallbackAnswer', 'Complete-by moved (`completeBy`).', ['Cache-Control']),
          '400': problem('The body is invalid, or the step declares no heartbeat.'),
          '401': refused,
          '409': movedOn,
          '413': problem(`The body is larger than ${maxCallbackBytes} bytes.`),
          '415': problem('The body is not JSON.'),
          ...failures,
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
        'Names this caller when a function key is shared: scopes its Idempotency-Keys and the orders it may read (ignored behind App Service Authentication, where the signed-in principal is the caller). Not authentication.',
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
    DeadLetterEntity: {
      name: 'entity',
      in: 'query',
      required: true,
      description: 'A queue, or a subscription as `topic/subscriptions/name`.',
      schema: inline(z.enum(deadLetterEntityNames)),
    },
    Top: {
      name: 'top',
      in: 'query',
      required: false,
      description: 'How many dead letters to list, oldest first.',
      schema: inline(z.number().int().min(1).max(maxTop).default(50)),
    },
    WorkflowVersion: {
      name: 'workflowVersion',
      in: 'query',
      required: false,
      description: 'Only orders of this workflow version.',
      schema: inline(z.number().int().min(1).max(999_999)),
    },
    CustomerId: {
      name: 'customerId',
      in: 'query',
      required: false,
      description: "Only this customer's orders.",
      schema: inline(z.string().min(1).max(200)),
    },
    From: {
      name: 'from',
      in: 'query',
      required: false,
      description: 'Only orders that entered the state at or after this time.',
      schema: inline(z.iso.datetime({ offset: true })),
    },
    To: {
      name: 'to',
      in: 'query',
      required: false,
      description: 'Only orders that entered the state at or before this time.',
      schema: inline(z.iso.datetime({ offset: true })),
    },
    HistoryPageSize: {
      name: 'pageSize',
      in: 'query',
      required: false,
      schema: inline(z.number().int().min(1).max(1000).default(100)),
    },
    After: {
      name: 'after',
      in: 'query',
      required: false,
      description: 'The cursor of the previous answer.',
      schema: inline(z.string().regex(/^[0-9]{1,13}$/)),
    },
    BulkAction: {
      name: 'action',
      in: 'path',
      required: true,
      schema: inline(z.enum(['resubmit', 'cancel', 'retry'])),
    },
    CancelReason: {
      name: 'reason',
      in: 'query',
      required: false,
      description: 'Recorded with the cancellation (the first 200 characters).',
      schema: inline(z.string()),
    },
    ServiceName: {
      name: 'service',
      in: 'query',
      required: false,
      description: 'Only this service (an Agent name, such as `payment`); all of them without it.',
      schema: inline(z.string()),
    },
    HoldReason: {
      name: 'reason',
      in: 'query',
      required: false,
      description: 'Why the order is held (the first 500 characters), kept with the hold.',
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
      {
        name: 'operator',
        description:
          'For operators: find orders by state, resubmit or cancel them; read, redrive or discard dead letters.',
      },
      {
        name: 'callbacks',
        description:
          'For remote services: the outcome and progress of work they accepted for a waiting step, authorized by the token in the URL the Agent passed them.',
      },
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
          description: `For operator routes only (list, resubmit, cancel, dead letters), which refuse a function key. In Azure: an Entra ID access token for the app, accepted by App Service Authentication, for a user or application assigned the ${operatorRole} app role. Locally: the operator key \`npm start\` prints (\`Authorization: Bearer <operator key>\`).`,
        },
      },
    },
  };
  return built;
}
