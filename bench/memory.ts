import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The host process's memory during the bench: samples of process.memoryUsage() printed by the
 * preloaded probe (bench/memoryProbe.ts) and the kernel's peak resident set (VmHWM), which
 * catches spikes between samples.
 */
export interface MemorySample {
  at: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

const marker = 'BENCH_MEMORY ';

/** A probe line (as the host printed it, possibly behind the stack's "[host] " prefix). */
export function parseMemorySample(line: string): MemorySample | undefined {
  const at = line.indexOf(marker);
  if (at < 0) return undefined;
  try {
    const s = JSON.parse(line.slice(at + marker.length)) as Partial<MemorySample>;
    const keys = ['at', 'rss', 'heapUsed', 'heapTotal', 'external', 'arrayBuffers'] as const;
    if (!keys.every((k) => typeof s[k] === 'number')) return undefined;
    return s as MemorySample;
  } catch {
    return undefined;
  }
}

export interface MemoryPeak {
  samples: number;
  rssMB: number;
  heapUsedMB: number;
  heapTotalMB: number;
  externalMB: number;
}

const mb = (bytes: number) => bytes / 2 ** 20;

export function peakOf(samples: readonly MemorySample[]): MemoryPeak | undefined {
  if (samples.length === 0) return undefined;
  const max = (f: (s: MemorySample) => number) => mb(Math.max(...samples.map(f)));
  return {
    samples: samples.length,
    rssMB: max((s) => s.rss),
    heapUsedMB: max((s) => s.heapUsed),
    heapTotalMB: max((s) => s.heapTotal),
    externalMB: max((s) => s.external),
  };
}

/** VmHWM (peak resident set) and VmRSS from /proc/<pid>/status, in MB; undefined off Linux. */
export function parseProcStatus(text: string): { hwmMB: number; rssMB: number } | undefined {
  const kb = (name: string) => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(text);
    return m ? Number(m[1]) / 1024 : undefined;
  };
  const hwm = kb('VmHWM');
  const rss = kb('VmRSS');
  return hwm === undefined || rss === undefined ? undefined : { hwmMB: hwm, rssMB: rss };
}

export function readProcStatus(pid: number): { hwmMB: number; rssMB: number } | undefined {
  try {
    return parseProcStatus(readFileSync(join('/proc', String(pid), 'status'), 'utf8'));
  } catch {
    return undefined;
  }
}

/** Keeps the samples, labelled by the bench section they were taken in. */
export class MemoryRecorder {
  private readonly bySection = new Map<string, MemorySample[]>();
  section = 'start-up';

  onLine(line: string): void {
    const s = parseMemorySample(line);
    if (!s) return;
    const list = this.bySection.get(this.section) ?? [];
    list.push(s);
    this.bySection.set(this.section, list);
  }

  peaks(): Record<string, MemoryPeak> {
    const out: Record<string, MemoryPeak> = {};
    for (const [k, v] of this.bySection) {
      const p = peakOf(v);
      if (p) out[k] = p;
    }
    return out;
  }

  overall(): MemoryPeak | undefined {
    return peakOf([...this.bySection.values()].flat());
  }
}
