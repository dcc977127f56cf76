import type { InvocationContext } from '@azure/functions';
import { inSpan, parentFrom, SpanKind } from './tracing.js';

/** The span kind a trigger implies: a request served, a message consumed, or the host's own timer. */
function kindOf(triggerType: string | undefined): SpanKind {
  if (triggerType === 'httpTrigger') return SpanKind.SERVER;
  if (triggerType === 'serviceBusTrigger') return SpanKind.CONSUMER;
  return SpanKind.INTERNAL;
}

/**
 * Runs one invocation in a span under the trace context the host handed it, under Azure's host
 * and the local host alike. The handlers then add the order's fields (annotate) and everything
 * they send carries this span.
 */
export function inInvocationSpan<T>(invocation: InvocationContext, handler: () => Promise<T>): Promise<T> {
  const triggerType = invocation.options?.trigger?.type;
  const attributes: Record<string, string | number> = {
    'faas.invocation_id': invocation.invocationId,
    'faas.name': invocation.functionName,
    'faas.trigger':
      triggerType === 'httpTrigger' ? 'http' : triggerType === 'timerTrigger' ? 'timer' : 'pubsub',
  };
  const deliveryCount = invocation.triggerMetadata?.deliveryCount;
  if (typeof deliveryCount === 'number') attributes['messaging.delivery_count'] = deliveryCount;
  const messageId = invocation.triggerMetadata?.messageId;
  if (typeof messageId === 'string') attributes['messaging.message.id'] = messageId;
  return inSpan(
    invocation.functionName,
    { kind: kindOf(triggerType), attributes },
    () => handler(),
    parentFrom(invocation.traceContext),
  );
}
