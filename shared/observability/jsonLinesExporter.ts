import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { ExportResultCode, hrTimeToMilliseconds, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import {
  AggregationTemporality,
  DataPointType,
  type PushMetricExporter,
  type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';

/**
 * The local host's telemetry file (`npm start -- --traces`): one JSON object per line, a span when
 * it ends and every metric point at each export, so a developer can `tail -f` it or `jq` it and a
 * test can read what the app emitted. Appends synchronously: the file is a development aid and the
 * lines of one export must not interleave with another's.
 */
export interface SpanLine {
  type: 'span';
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: string;
  start: string;
  durationMs: number;
  status: 'ok' | 'error' | 'unset';
  error?: string;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string; attributes?: Record<string, unknown> }>;
}

export interface MetricLine {
  type: 'metric';
  at: string;
  name: string;
  attributes: Record<string, unknown>;
  /** Counters: the running total; gauges: the last value; histograms: absent (see the rest). */
  value?: number;
  count?: number;
  sum?: number;
  min?: number;
  max?: number;
}

export type TelemetryLine = SpanLine | MetricLine;

const kinds = ['internal', 'server', 'client', 'producer', 'consumer'];
const statuses = ['unset', 'ok', 'error'] as const;

function append(path: string, lines: TelemetryLine[]): void {
  if (lines.length === 0) return;
  appendFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
}

export function spanLine(span: ReadableSpan): SpanLine {
  const line: SpanLine = {
    type: 'span',
    traceId: span.spanContext().traceId,
    spanId: span.spanContext().spanId,
    name: span.name,
    kind: kinds[span.kind] ?? String(span.kind),
    start: new Date(hrTimeToMilliseconds(span.startTime)).toISOString(),
    durationMs: Math.round(hrTimeToMilliseconds(span.duration) * 10) / 10,
    status: statuses[span.status.code] ?? 'unset',
    attributes: { ...span.attributes },
    links: span.links.map((l) => ({
      traceId: l.context.traceId,
      spanId: l.context.spanId,
      ...(l.attributes ? { attributes: { ...l.attributes } } : {}),
    })),
  };
  if (span.parentSpanContext) line.parentSpanId = span.parentSpanContext.spanId;
  if (span.status.message) line.error = span.status.message;
  return line;
}

export class JsonLinesSpanExporter implements SpanExporter {
  constructor(private readonly path: string) {
    mkdirSync(dirname(path), { recursive: true });
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    try {
      append(this.path, spans.map(spanLine));
      done({ code: ExportResultCode.SUCCESS });
    } catch (e) {
      done({ code: ExportResultCode.FAILED, error: e as Error });
    }
  }

  async shutdown(): Promise<void> {}
}

export class JsonLinesMetricExporter implements PushMetricExporter {
  constructor(private readonly path: string) {
    mkdirSync(dirname(path), { recursive: true });
  }

  export(metrics: ResourceMetrics, done: (result: ExportResult) => void): void {
    const at = new Date().toISOString();
    const lines: MetricLine[] = [];
    for (const scope of metrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        for (const point of metric.dataPoints) {
          const base = {
            type: 'metric' as const,
            at,
            name: metric.descriptor.name,
            attributes: { ...point.attributes },
          };
          if (metric.dataPointType === DataPointType.HISTOGRAM) {
            const h = point.value as { count: number; sum?: number; min?: number; max?: number };
            lines.push({ ...base, count: h.count, sum: h.sum, min: h.min, max: h.max });
          } else if (typeof point.value === 'number') {
            lines.push({ ...base, value: point.value });
          }
        }
      }
    }
    try {
      append(this.path, lines);
      done({ code: ExportResultCode.SUCCESS });
    } catch (e) {
      done({ code: ExportResultCode.FAILED, error: e as Error });
    }
  }

  /** Running totals: the last line of a counter is its value, as a reader expects of a file. */
  selectAggregationTemporality(): AggregationTemporality {
    return AggregationTemporality.CUMULATIVE;
  }

  async forceFlush(): Promise<void> {}
  async shutdown(): Promise<void> {}
}
