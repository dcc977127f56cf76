import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchStack } from './benchStack.js';
import { measureActual, type RunFigures } from './throughput.js';

/**
 * End-to-end throughput with telemetry off and on, in one run on one stack: the host restarts
 * between the two (same ports, same data), and each mode gets the same warm-up. "On" is the app's
 * full telemetry (a span per invocation and remote call, traceparent on every message and call,
 * the metrics) exported to the local JSON-lines file; Application Insights' exporter does the same
 * work plus its HTTP upload, which a local run cannot reach.
 */
export interface TracingOverhead {
  concurrency: number;
  orders: number;
  off: RunFigures;
  on: RunFigures;
  /** on / off orders per second: 1.0 means no cost. */
  ratio: number;
  /** Bytes the "on" run wrote to the telemetry file. */
  telemetryBytes: number;
}

async function restartWith(bench: BenchStack, file: string | undefined): Promise<void> {
  if (file) bench.stack.env.TELEMETRY_FILE = file;
  else delete bench.stack.env.TELEMETRY_FILE;
  await bench.stack.killHost('SIGTERM');
  await bench.stack.startHost();
  await measureActual(bench, 1, 2); // warm-up: clients and links
}

export async function measureTracingOverhead(
  bench: BenchStack,
  runs: ReadonlyArray<{ n: number; orders: number }>,
): Promise<TracingOverhead[]> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-telemetry-'));
  const results: TracingOverhead[] = [];
  try {
    for (const { n, orders } of runs) {
      await restartWith(bench, undefined);
      const off = await measureActual(bench, n, orders);
      const file = join(dir, `telemetry-${n}.jsonl`);
      await restartWith(bench, file);
      const before = statSync(file, { throwIfNoEntry: false })?.size ?? 0;
      const on = await measureActual(bench, n, orders);
      const telemetryBytes = (statSync(file, { throwIfNoEntry: false })?.size ?? 0) - before;
      results.push({ concurrency: n, orders, off, on, ratio: on.perSecond / off.perSecond, telemetryBytes });
    }
  } finally {
    await restartWith(bench, undefined);
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}
