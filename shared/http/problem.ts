import type { HttpResponseInit } from '@azure/functions';
import { z } from 'zod';
import { processStates } from '../domain/state.js';

/**
 * RFC 9457 problem details. Every error a client sees is one of these: a status, a short
 * title, and a detail a person can act on. Never a stack trace.
 */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  [extension: string]: unknown;
}

const typeBase = 'https://github.com/order-processing-sas/problems/';

export const problemTypes = {
  validation: 'validation-error',
  tooLarge: 'payload-too-large',
  unsupportedMediaType: 'unsupported-media-type',
  malformedJson: 'malformed-json',
  notFound: 'not-found',
  conflict: 'conflict',
  idempotencyConflict: 'idempotency-key-reused',
  invalidState: 'invalid-state',
  unauthenticated: 'unauthenticated',
  forbidden: 'forbidden',
  busy: 'busy',
  overloaded: 'overloaded',
  purged: 'order-purged',
  archiveOffline: 'archive-offline',
  internal: 'internal-error',
} as const;

export type ProblemType = (typeof problemTypes)[keyof typeof problemTypes];

export function problem(
  status: number,
  type: ProblemType,
  title: string,
  detail?: string,
  extensions: Record<string, unknown> = {},
): HttpResponseInit {
  const body: ProblemDetails = { type: typeBase + type, title, status, ...extensions };
  if (detail !== undefined) body.detail = detail;
  return {
    status,
    headers: { 'Content-Type': 'application/problem+json', 'Cache-Control': 'no-store' },
    body: JSON.stringify(body),
  };
}

/** The same response, telling the client when to try again (RFC 9110 Retry-After, in seconds). */
export function retryAfter(response: HttpResponseInit, seconds: number): HttpResponseInit {
  return {
    ...response,
    headers: { ...(response.headers as Record<string, string>), 'Retry-After': String(seconds) },
  };
}

/** One failing field of a request, as reported in a 400's `errors` extension. */
export interface FieldError {
  /** JSON Pointer (RFC 6901) to the failing value, e.g. `/items/0/quantity`. */
  pointer: string;
  detail: string;
}

export const fieldErrorSchema = z.strictObject({
  pointer: z.string().meta({ description: 'JSON Pointer (RFC 6901) to the failing value.' }),
  detail: z.string(),
});

/**
 * The problem+json body as the OpenAPI document publishes it. Loose, because RFC 9457 lets
 * problems carry extensions; the ones this API sends are typed so clients can rely on them.
 */
export const problemDetailsSchema = z
  .looseObject({
    type: z.enum(Object.values(problemTypes).map((t) => typeBase + t)),
    title: z.string(),
    status: z.number().int().min(400).max(599),
    detail: z.string().optional(),
    instance: z.string().optional(),
    errors: z.array(fieldErrorSchema).optional().meta({ description: 'The failing fields of a 400.' }),
    maxBytes: z.number().int().optional().meta({ description: 'The body limit a 413 refers to.' }),
    orderId: z.string().optional().meta({ description: 'The order an Idempotency-Key already names.' }),
    processState: z
      .enum(processStates)
      .optional()
      .meta({ description: "The order's state when a 409 refuses." }),
    invocationId: z.string().optional().meta({ description: 'Quote it when reporting a 500 or 503.' }),
  })
  .meta({ description: 'RFC 9457 problem details.' });

export function validationProblem(errors: FieldError[], detail = 'The request body has invalid fields.') {
  return problem(400, problemTypes.validation, 'Invalid request', detail, { errors });
}
