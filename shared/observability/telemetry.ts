import { metrics, trace } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  TracerProvider,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import {
  MeterProvider,
  PeriodicExportingMetricReader,
  type IMetricReader,
  type PushMetricExporter,
} from '@opentelemetry/sdk-metrics';
import { AzureMonitorMetricExporter, AzureMonitorTraceExporter } from '@azure/monitor-opentelemetry-exporter';
import { DefaultAzureCredential } from '@azure/identity';
import { JsonLinesMetricExporter, JsonLinesSpanExporter } from './jsonLinesExporter.js';
import { startPropagation } from './propagation.js';

/**
 * Propagation is always on: the W3C propagator and the context manager are registered in every
 * process, so a caller's `traceparent` reaches every message and remote call of its order whether
 * or not anything here records spans (see propagation.ts). Recording and exporting spans and
 * metrics are switched on only when there is somewhere to send them: Application Insights
 * (APPLICATIONINSIGHTS_CONNECTION_STRING, identity-based when APPLICATIONINSIGHTS_AUTHENTICATION_STRING
 * says Authorization=AAD) and/or the local telemetry file (TELEMETRY_FILE, set by
 * `npm start -- --traces`). Without either, the API's no-op tracer hands the caller's context on
 * unchanged (same trace id and parent span) and records nothing.
 */
export const telemetrySettingNames = {
  connectionString: 'APPLICATIONINSIGHTS_CONNECTION_STRING',
  authentication: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING',
  file: 'TELEMETRY_FILE',
  metricsIntervalMs: 'TELEMETRY_METRICS_INTERVAL_MS',
} as const;

export interface TelemetryConfig {
  connectionString?: string;
  /** Entra ID for the exporters; undefined means the connection string's key. */
  managedIdentityClientId?: string | null;
  file?: string;
  metricsIntervalMs: number;
}

export class TelemetrySettingError extends Error {
  constructor(name: string, problem: string) {
    super(`Setting ${name}: ${problem}`);
    this.name = 'TelemetrySettingError';
  }
}

export function telemetryConfig(env: NodeJS.ProcessEnv): TelemetryConfig {
  const config: TelemetryConfig = { metricsIntervalMs: 60_000 };
  const connectionString = env[telemetrySettingNames.connectionString]?.trim();
  if (connectionString) {
    if (!/InstrumentationKey=/i.test(connectionString))
      throw new TelemetrySettingError(telemetrySettingNames.connectionString, 'has no InstrumentationKey.');
    config.connectionString = connectionString;
    const auth = env[telemetrySettingNames.authentication] ?? '';
    if (/Authorization=AAD/i.test(auth)) {
      config.managedIdentityClientId = /ClientId=([^;]+)/i.exec(auth)?.[1] ?? null;
    }
  }
  const file = env[telemetrySettingNames.file]?.trim();
  if (file) config.file = file;
  const interval = env[telemetrySettingNames.metricsIntervalMs];
  if (interval !== undefined && interval !== '') {
    const ms = Number(interval);
    if (!Number.isInteger(ms) || ms < 100 || ms > 3_600_000)
      throw new TelemetrySettingError(
        telemetrySettingNames.metricsIntervalMs,
        `must be an integer from 100 to 3600000 (ms); got ${JSON.stringify(interval)}.`,
      );
    config.metricsIntervalMs = ms;
  }
  return config;
}

export interface Telemetry {
  readonly enabled: boolean;
  /** How often metrics are exported: sampling a gauge more often than this is wasted work. */
  readonly metricsIntervalMs: number;
  /** Exports what is buffered (spans, and the metrics as they are now). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

const off: Telemetry = {
  enabled: false,
  metricsIntervalMs: Number.POSITIVE_INFINITY,
  flush: async () => {},
  shutdown: async () => {},
};
let current: Telemetry | undefined;

/** Starts telemetry once per process from the settings; later calls return the same handle. */
export function startTelemetry(env: NodeJS.ProcessEnv = process.env): Telemetry {
  if (!current) {
    const config = telemetryConfig(env);
    startPropagation();
    current = create(config);
  }
  return current;
}

/** The telemetry this process started, or the disabled one when it started none. */
export function activeTelemetry(): Telemetry {
  return current ?? off;
}

function create(config: TelemetryConfig): Telemetry {
  const spanExporters: SpanExporter[] = [];
  const metricExporters: PushMetricExporter[] = [];
  if (config.connectionString) {
    const credential =
      config.managedIdentityClientId === undefined
        ? undefined
        : new DefaultAzureCredential(
            config.managedIdentityClientId ? { managedIdentityClientId: config.managedIdentityClientId } : {},
          );
    const options = { connectionString: config.connectionString, ...(credential ? { credential } : {}) };
    spanExporters.push(new AzureMonitorTraceExporter(options));
    metricExporters.push(new AzureMonitorMetricExporter(options));
  }
  if (config.file) {
    spanExporters.push(new JsonLinesSpanExporter(config.file));
    metricExporters.push(new JsonLinesMetricExporter(config.file));
  }
  if (spanExporters.length === 0) return off;

  const resource = resourceFromAttributes({
    'service.name': process.env.WEBSITE_SITE_NAME ?? 'order-processing',
    'service.namespace': 'order-processing',
  });
  const spanProcessors: SpanProcessor[] = spanExporters.map(
    (exporter) => new BatchSpanProcessor({ exporter, scheduledDelayMillis: config.file ? 200 : 5000 }),
  );
  const tracerProvider = new TracerProvider({ resource, spanProcessors });
  const readers: IMetricReader[] = metricExporters.map(
    (exporter) =>
      new PeriodicExportingMetricReader({
        exporter,
        exportIntervalMillis: config.metricsIntervalMs,
        exportTimeoutMillis: Math.min(30_000, config.metricsIntervalMs),
      }),
  );
  const meterProvider = new MeterProvider({ resource, readers });

  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  return {
    enabled: true,
    metricsIntervalMs: config.metricsIntervalMs,
    flush: async () => {
      await Promise.all([tracerProvider.forceFlush(), meterProvider.forceFlush()]);
    },
    shutdown: async () => {
      await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}
