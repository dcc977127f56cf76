import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
} from '@opentelemetry/api';

/**
 * The app's side of W3C trace context: every invocation runs in a span whose parent is the trace
 * context the host handed it (`context.traceContext`: the HTTP `traceparent` header or the
 * message's `Diagnostic-Id`), every message and remote call carries the active span onward, and an
 * order keeps its submission's traceparent so the Supervisor can rejoin the order's trace later.
 * Propagation always works (propagation.ts); with telemetry off no span is recorded: a "span" is
 * then the caller's context handed on unchanged.
 */
export const tracerName = 'order-processing';

export function tracer() {
  return trace.getTracer(tracerName);
}

/** What a Functions host hands an invocation (InvocationContext.traceContext). */
export interface HostTraceContext {
  traceParent?: string | null;
  traceState?: string | null;
}

/** The host's trace context as an OpenTelemetry parent; the root when there is none. */
export function parentFrom(traceContext: HostTraceContext | null | undefined): Context {
  if (!traceContext?.traceParent) return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent: traceContext.traceParent };
  if (traceContext.traceState) carrier.tracestate = traceContext.traceState;
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** The active span as a `traceparent` value, or undefined when nothing is traced. */
export function currentTraceParent(ctx: Context = context.active()): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent;
}

/** The trace id of a traceparent (`00-<trace id>-<span id>-<flags>`). */
export function traceIdOf(traceParent: string | undefined): string | undefined {
  return traceParent?.split('-')[1];
}

/** `{ traceId }` of the active span, for a record that should name its trace; {} when untraced. */
export function activeTraceId(): { traceId?: string } {
  const traceId = traceIdOf(currentTraceParent());
  return traceId ? { traceId } : {};
}

/**
 * What a Service Bus message carries: `Diagnostic-Id` is what the Functions host and the Azure SDK
 * read, `traceparent` what other OpenTelemetry consumers read. Both hold the sender's span.
 */
export function messageTraceProperties(): Record<string, string> {
  const traceParent = currentTraceParent();
  return traceParent ? { 'Diagnostic-Id': traceParent, traceparent: traceParent } : {};
}

/** Headers for an outgoing HTTP call: `traceparent` (and `tracestate`) of the active span. */
export function injectTraceHeaders(headers: Record<string, string>): Record<string, string> {
  propagation.inject(context.active(), headers);
  return headers;
}

/** The order's identity and progress as span attributes (undefined values are left out). */
export interface OrderSpanFields {
  orderId?: string;
  step?: string;
  attempt?: number;
  run?: number;
  kind?: string;
  workflow?: string;
  workflowVersion?: number;
  outcome?: string;
}

const attributeNames: Record<keyof OrderSpanFields, string> = {
  orderId: 'order.id',
  step: 'order.step',
  attempt: 'order.attempt',
  run: 'order.run',
  kind: 'order.step_kind',
  workflow: 'order.workflow',
  workflowVersion: 'order.workflow_version',
  outcome: 'order.outcome',
};

export function orderAttributes(fields: OrderSpanFields): Attributes {
  const out: Attributes = {};
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined && value !== null) out[attributeNames[key as keyof OrderSpanFields]] = value;
  }
  return out;
}

/**
 * The order-level fields of a state: its workflow and version (a state stored before versions
 * existed is version 1) and its run.
 */
export function stateFields(state: {
  orderId: string;
  workflow: string;
  run: number;
  workflowVersion?: number;
}): OrderSpanFields {
  return {
    orderId: state.orderId,
    workflow: state.workflow,
    workflowVersion: typeof state.workflowVersion === 'number' ? state.workflowVersion : 1,
    run: state.run,
  };
}

/** Adds the order's fields to the span this code runs in (the invocation's, or a call's). */
export function annotate(fields: OrderSpanFields): void {
  trace.getActiveSpan()?.setAttributes(orderAttributes(fields));
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  links?: Link[];
  startTime?: Date;
}

/**
 * Runs `work` in a new span under `parent` (default: the active span), ending it when the work
 * settles; a throw marks the span failed and is rethrown unchanged.
 */
export async function inSpan<T>(
  name: string,
  options: SpanOptions,
  work: (span: Span) => Promise<T>,
  parent: Context = context.active(),
): Promise<T> {
  const span = tracer().startSpan(name, options, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => work(span));
  } catch (e) {
    span.recordException(e as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (e as Error).message?.slice(0, 500) });
    throw e;
  } finally {
    span.end();
  }
}

/** A link to the active span (e.g. from an order's own trace back to the sweep that acted). */
export function linkToActive(attributes?: Attributes): Link[] {
  const span = trace.getActiveSpan();
  if (!span || !span.spanContext().traceId || !span.isRecording()) return [];
  return [{ context: span.spanContext(), ...(attributes ? { attributes } : {}) }];
}

export { SpanKind, SpanStatusCode };
