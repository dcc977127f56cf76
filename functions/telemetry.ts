import { app } from '@azure/functions';
import { startTelemetry } from '../shared/observability/telemetry.js';
import { inInvocationSpan } from '../shared/observability/invocationSpans.js';

/**
 * Not a function: the app's telemetry, loaded with the functions (package.json `main`). With
 * Application Insights or the local telemetry file configured, every invocation runs in a span
 * under the host's trace context; otherwise nothing is registered.
 */
const telemetry = startTelemetry();

if (telemetry.enabled) {
  app.hook.preInvocation((hook) => {
    const handler = hook.functionHandler;
    const invocation = hook.invocationContext;
    hook.functionHandler = (...args: unknown[]) =>
      inInvocationSpan(invocation, async () => (handler as (...a: unknown[]) => unknown)(...args));
  });
  app.hook.appTerminate(async () => {
    await telemetry.shutdown();
  });
}
