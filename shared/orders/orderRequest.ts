import { z } from 'zod';
import type { FieldError } from '../http/problem.js';

/**
 * The body of POST /api/orders. Strict: unknown fields are refused rather than silently
 * dropped, so a client's typo ("quantitiy") is a 400 it can see, not a lost value.
 */
const text = (max: number) => z.string().trim().min(1).max(max);
const code = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;

export const orderItemSchema = z
  .object({
    sku: text(64).regex(code, 'letters, digits and . _ : - only'),
    quantity: z.number().int().min(1).max(1000),
    unitPrice: z
      .number()
      .min(0)
      .max(1_000_000)
      .refine((v) => Math.round(v * 100) === Number((v * 100).toFixed(6)), 'at most 2 decimal places'),
  })
  .strict();

export const shippingAddressSchema = z
  .object({
    name: text(100),
    line1: text(200),
    line2: text(200).optional(),
    city: text(100),
    postalCode: text(20),
    country: z.string().regex(/^[A-Z]{2}$/, 'an ISO 3166-1 alpha-2 code such as "DE"'),
  })
  .strict();

export const orderRequestSchema = z
  .object({
    customerId: text(64).regex(code, 'letters, digits and . _ : - only'),
    items: z.array(orderItemSchema).min(1).max(50),
    shippingAddress: shippingAddressSchema,
  })
  .strict();

export type OrderRequest = z.infer<typeof orderRequestSchema>;

export type ParseResult<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] };

/** Turns zod issues into JSON Pointer field errors for the problem response. */
export function toFieldErrors(error: z.ZodError): FieldError[] {
  return error.issues.slice(0, 50).map((issue) => ({
    pointer: '/' + issue.path.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/'),
    detail: issue.message,
  }));
}

export function parseOrderRequest(value: unknown): ParseResult<OrderRequest> {
  const result = orderRequestSchema.safeParse(value);
  return result.success
    ? { ok: true, value: result.data }
    : { ok: false, errors: toFieldErrors(result.error) };
}
