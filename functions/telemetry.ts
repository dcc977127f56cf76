import { app } from '@azure/functions';
import { startTelemetry } from '../shared/observability/telemetry.js';
import { inInvocationSpan } from '../shared/observability/invocationSpans.js';

/**
 * Not a function: the app's telemetry, loaded with the functions (package.json `main`). Every
 * invocation runs under the host's trace context (the caller's `traceparent`, the message's
 * Diagnostic-Id), so what it sends carries that context on; with Application Insights or the local
 * telemetry file configured, each invocation is also a recorded span.
 */
const telemetry = startTelemetry();

app.hook.preInvocation((hook) => {
  const handler = hook.functionHandler;
  const invocation = hook.invocationContext;
  hook.functionHandler = (...args: unknown[]) =>
    inInvocationSpan(invocation, async () => (handler as (...a: unknown[]) => unknown)(...args));
});

if (telemetry.enabled) {
  app.hook.appTerminate(async () => {
    await telemetry.shutdown();
  });
}
