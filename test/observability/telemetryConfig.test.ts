import assert from 'node:assert/strict';
import { test } from 'node:test';
import { telemetryConfig, TelemetrySettingError } from '../../shared/observability/telemetry.js';
import { orderAttributes, parentFrom, currentTraceParent } from '../../shared/observability/tracing.js';

test('telemetry is off without a connection string or a file', () => {
  assert.deepEqual(telemetryConfig({}), { metricsIntervalMs: 60_000 });
});

test('Application Insights is identity-based when the authentication string says AAD', () => {
  const config = telemetryConfig({
    APPLICATIONINSIGHTS_CONNECTION_STRING:
      'InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=https://x/',
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=abc-123;Authorization=AAD',
  });
  assert.equal(config.managedIdentityClientId, 'abc-123');
  const keyed = telemetryConfig({ APPLICATIONINSIGHTS_CONNECTION_STRING: 'InstrumentationKey=k' });
  assert.equal(keyed.managedIdentityClientId, undefined);
});

test('a bad telemetry setting fails naming the setting', () => {
  assert.throws(
    () => telemetryConfig({ APPLICATIONINSIGHTS_CONNECTION_STRING: 'not a connection string' }),
    (e: unknown) =>
      e instanceof TelemetrySettingError && /APPLICATIONINSIGHTS_CONNECTION_STRING/.test(e.message),
  );
  assert.throws(
    () => telemetryConfig({ TELEMETRY_FILE: '/tmp/x', TELEMETRY_METRICS_INTERVAL_MS: 'soon' }),
    /TELEMETRY_METRICS_INTERVAL_MS/,
  );
});

test('with telemetry off, no traceparent is invented and attributes leave out what is unknown', () => {
  // No propagator registered in this process: extraction and injection are no-ops.
  assert.equal(
    currentTraceParent(
      parentFrom({ traceParent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }),
    ),
    undefined,
  );
  assert.deepEqual(orderAttributes({ orderId: 'o', step: undefined, attempt: 2 }), {
    'order.id': 'o',
    'order.attempt': 2,
  });
});
