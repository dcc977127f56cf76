import { z } from 'zod';
import type { Order, OrderState } from '../domain/index.js';
import { orderIdPattern } from '../domain/orderId.js';
import {
  processStates,
  type CompensationReason,
  type ErrorCode,
  type ProcessState,
  type StepStatus,
} from '../domain/state.js';
import { orderItemSchema, shippingAddressSchema } from './orderRequest.js';

/**
 * What the API answers about orders, as zod schemas: the OpenAPI document is generated from
 * them, and the functions below are typed by them, so a field added here or there without the
 * other fails the build.
 */

/** Every member of a domain union, or the build fails: the published enums cannot fall behind. */
function everyMemberOf<T extends string>() {
  return <const L extends readonly T[]>(list: L & ([T] extends [L[number]] ? unknown : never)) => list;
}

const stepStatuses = everyMemberOf<StepStatus>()([
  'NotStarted',
  'Running',
  'TimedOut',
  'Completed',
  'Failed',
  'Compensating',
  'Compensated',
  'CompensationFailed',
]);
const compensationReasons = everyMemberOf<CompensationReason>()(['step-failed', 'cancelled', 'gave-up']);
const errorCodes = everyMemberOf<ErrorCode>()([
  'GaveUp',
  'CompensationFailed',
  'CompensationGaveUp',
  'WorkflowRetired',
]);

export const processStateSchema = z.enum(processStates as [ProcessState, ...ProcessState[]]);
const timestamp = z.iso.datetime();
export const orderIdSchema = z
  .string()
  .regex(orderIdPattern)
  .meta({ format: 'uuid', description: 'A lower-case UUID.' });

const orderErrorSchema = z
  .strictObject({ code: z.enum(errorCodes), detail: z.string().nullable() })
  .nullable()
  .meta({ description: 'Why the order is (or is heading for) Error; null otherwise.' });

export const stepViewSchema = z.strictObject({
  name: z.string(),
  status: z.enum(stepStatuses),
  attempt: z.number().int().nonnegative(),
  compensationAttempt: z.number().int().nonnegative(),
  lastError: z.string().nullable(),
  completeBy: timestamp.nullable(),
  startedAt: timestamp.nullable(),
  completedAt: timestamp.nullable(),
  compensatedAt: timestamp.nullable(),
  waitingSince: timestamp.optional().meta({
    description:
      'A waiting step (callback or approval): when its wait began. Present only while it waits or after it waited.',
  }),
  reference: z
    .string()
    .optional()
    .meta({ description: "The remote service's reference for the accepted work." }),
});

export const orderViewSchema = z.strictObject({
  orderId: orderIdSchema,
  processState: processStateSchema,
  workflow: z.string().meta({ description: 'The workflow the order follows, e.g. `order`.' }),
  workflowVersion: z.number().int().min(1).meta({
    description:
      'The workflow version the order started on; it finishes, compensates and is resubmitted on it.',
  }),
  failureCount: z.number().int().nonnegative(),
  completeBy: timestamp.nullable(),
  lockedBy: z.string().nullable(),
  run: z.number().int().min(1),
  compensationReason: z.enum(compensationReasons).nullable(),
  error: orderErrorSchema,
  createdAt: timestamp,
  updatedAt: timestamp,
  customerId: z.string().optional(),
  items: z.array(orderItemSchema).optional(),
  shippingAddress: shippingAddressSchema.optional(),
  steps: z.array(stepViewSchema).meta({ description: 'In workflow order.' }),
});
export type OrderView = z.output<typeof orderViewSchema>;

export const orderSummarySchema = z.strictObject({
  orderId: orderIdSchema,
  processState: processStateSchema,
  failureCount: z.number().int().nonnegative(),
  error: orderErrorSchema,
  updatedAt: timestamp,
  workflow: z.string(),
  workflowVersion: z.number().int().min(1),
  customerId: z.string(),
  createdAt: timestamp,
  stateSince: timestamp.meta({
    description: 'When the order entered its process state (what from/to filter on).',
  }),
});
export type OrderSummary = z.output<typeof orderSummarySchema>;

/** GET /api/orders?state=...: one page of the operator's list. */
export const orderListPageSchema = z.strictObject({
  state: processStateSchema,
  orders: z.array(orderSummarySchema),
  continuationToken: z.string().optional().meta({ description: 'Present when there is a next page.' }),
  next: z.string().optional().meta({ description: 'The next page as a path with its query.' }),
});

/** The 202 of a submission, resubmit or cancel: where to follow the order. */
export const orderAcceptedSchema = z.strictObject({
  orderId: orderIdSchema,
  processState: processStateSchema,
  statusUrl: z.url(),
});

/** What GET /api/orders/{orderId} answers: the recorded process state, step by step. */
export function orderView(order: Order | undefined, state: OrderState): OrderView {
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  return {
    orderId: state.orderId,
    processState: state.processState,
    workflow: state.workflow,
    workflowVersion: state.workflowVersion,
    failureCount: state.failureCount,
    completeBy: iso(state.completeBy),
    lockedBy: state.lockedBy,
    run: state.run,
    compensationReason: state.compensationReason,
    error: state.errorCode ? { code: state.errorCode, detail: state.errorDetail } : null,
    createdAt: state.createdAt.toISOString(),
    updatedAt: state.updatedAt.toISOString(),
    ...(order
      ? { customerId: order.customerId, items: order.items, shippingAddress: order.shippingAddress }
      : {}),
    steps: state.steps.map((s) => ({
      name: s.name,
      status: s.status,
      attempt: s.attempt,
      compensationAttempt: s.compensationAttempt,
      lastError: s.lastError,
      completeBy: iso(s.completeBy),
      startedAt: iso(s.startedAt),
      completedAt: iso(s.completedAt),
      compensatedAt: iso(s.compensatedAt),
      ...(s.waitingSince ? { waitingSince: s.waitingSince.toISOString() } : {}),
      ...(s.reference ? { reference: s.reference } : {}),
    })),
  };
}

/** One line of the operator's list. */
export function orderSummary(
  state: Omit<OrderState, 'steps'> & { customerId: string; workflowVersion: number; stateSince: Date },
): OrderSummary {
  return {
    orderId: state.orderId,
    processState: state.processState,
    failureCount: state.failureCount,
    error: state.errorCode ? { code: state.errorCode, detail: state.errorDetail } : null,
    updatedAt: state.updatedAt.toISOString(),
    workflow: state.workflow,
    workflowVersion: state.workflowVersion,
    customerId: state.customerId,
    createdAt: state.createdAt.toISOString(),
    stateSince: state.stateSince.toISOString(),
  };
}
