import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchStack } from './benchStack.js';
import { joinRuns, measureActual, measureActualRaw, type RunFigures } from './throughput.js';

/**
 * End-to-end throughput with telemetry off and on, in one run on one stack: the host restarts
 * between modes (same ports, same data), and each mode gets the same warm-up. "On" is the app's
 * full telemetry (a span per invocation and remote call, traceparent on every message and call,
 * the metrics) exported to the local JSON-lines file; Application Insights' exporter does the same
 * work plus its HTTP upload, which a local run cannot reach.
 *
 * The modes alternate off, on, on, off (half the orders each time): the stack's tables grow with
 * every order and Azurite slows as they do, so a mode measured second would pay for the first
 * one's data. With the alternation both modes see the same table sizes on average.
 */
export interface TracingOverhead {
  concurrency: number;
  orders: number;
  off: RunFigures;
  on: RunFigures;
  /** on / off orders per second: 1.0 means no cost. */
  ratio: number;
  /** Bytes the "on" runs wrote to the telemetry file. */
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
  const size = (file: string): number => statSync(file, { throwIfNoEntry: false })?.size ?? 0;
  try {
    for (const { n, orders } of runs) {
      const half = Math.max(n, Math.ceil(orders / 2));
      const file = join(dir, `telemetry-${n}.jsonl`);
      const off: Array<{ latencies: number[]; elapsedMs: number }> = [];
      const on: typeof off = [];
      let telemetryBytes = 0;
      for (const mode of ['off', 'on', 'on', 'off'] as const) {
        const switching = (mode === 'on') !== (bench.stack.env.TELEMETRY_FILE !== undefined);
        if (switching || off.length + on.length === 0)
          await restartWith(bench, mode === 'on' ? file : undefined);
        const before = size(file);
        (mode === 'on' ? on : off).push(await measureActualRaw(bench, n, half));
        if (mode === 'on') telemetryBytes += size(file) - before;
      }
      const offFigures = joinRuns(n, off);
      const onFigures = joinRuns(n, on);
      results.push({
        concurrency: n,
        orders: offFigures.orders,
        off: offFigures,
        on: onFigures,
        ratio: onFigures.perSecond / offFigures.perSecond,
        telemetryBytes,
      });
    }
  } finally {
    await restartWith(bench, undefined);
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}
