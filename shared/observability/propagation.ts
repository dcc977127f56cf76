import { context, propagation } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/**
 * W3C trace context, carried across every invocation, message and remote call. Propagating a
 * caller's context is not exporting it: a client (or a remote service) that traces keeps the order
 * in its trace even when this app records nothing, so this is registered in every process,
 * whatever telemetry.ts decides about recording.
 */
let started = false;

export function startPropagation(): void {
  if (started) return;
  started = true;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
}
