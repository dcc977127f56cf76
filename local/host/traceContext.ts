import { randomBytes } from 'node:crypto';

/**
 * The trace context the Functions host hands each invocation (`RpcTraceContext`, read by the
 * library into `context.traceContext`): from an HTTP request's `traceparent` header, from a Service
 * Bus message's `Diagnostic-Id` application property (the property the Azure SDK and the Service
 * Bus extension use; `traceparent` as a fallback), and otherwise a new trace, as the host starts
 * one for a timer or an untraced request.
 */
export interface RpcTraceContext {
  traceParent: string;
  traceState: string;
  attributes: Record<string, string>;
}

const traceParentPattern = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** A valid W3C traceparent (version 00), lower-cased; undefined for anything else. */
export function validTraceParent(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const v = value.trim().toLowerCase();
  return traceParentPattern.test(v) ? v : undefined;
}

export function newTraceParent(): string {
  return `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;
}

function traceContext(traceParent: string | undefined, traceState?: unknown): RpcTraceContext {
  return {
    traceParent: traceParent ?? newTraceParent(),
    traceState: traceParent && typeof traceState === 'string' ? traceState : '',
    attributes: {},
  };
}

export function httpTraceContext(headers: Record<string, string | string[] | undefined>): RpcTraceContext {
  const header = headers['traceparent'];
  const state = headers['tracestate'];
  return traceContext(validTraceParent(Array.isArray(header) ? header[0] : header), state);
}

export function messageTraceContext(
  applicationProperties: Record<string, unknown> | undefined,
): RpcTraceContext {
  const props = applicationProperties ?? {};
  const traceParent = validTraceParent(props['Diagnostic-Id']) ?? validTraceParent(props['traceparent']);
  return traceContext(traceParent, props['tracestate']);
}

export function timerTraceContext(): RpcTraceContext {
  return traceContext(undefined);
}
