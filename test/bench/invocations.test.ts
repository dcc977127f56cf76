import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  billedAloneMs,
  durationsByFunction,
  executionsPer,
  overlapFactor,
  parseInvocation,
  within,
  type Invocation,
} from '../../bench/invocations.js';
import {
  MemoryRecorder,
  parseMemorySample,
  parseProcStatus,
  peakOf,
  readProcStatus,
} from '../../bench/memory.js';
import { parsePriceTable } from '../../bench/pricing.js';
import { formatLogLine } from '../../local/host/index.js';

const prices = parsePriceTable(
  JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'bench', 'prices.json'), 'utf8')),
);

describe('invocations from the host output', () => {
  it("reads the host's own Executed line, as the stack prefixes it", () => {
    const at = new Date('2026-11-23T19:00:00.250Z');
    const line = formatLogLine(
      {
        level: 'information',
        category: 'system',
        functionName: 'scheduler',
        invocationId: 'abc',
        message: "Executed 'Functions.scheduler' (Succeeded, Id=abc, Duration=37ms)",
      },
      at,
    );
    assert.deepEqual(parseInvocation(`[host] ${line}`), {
      fn: 'scheduler',
      ok: true,
      end: at.getTime(),
      durationMs: 37,
    });
  });

  it('a failed invocation counts too (it is billed); other lines are not invocations', () => {
    const failed = parseInvocation(
      "2026-11-23T19:00:01Z [Error] inventoryAgent (x): Executed 'Functions.inventoryAgent' (Failed, Id=x, Duration=3001ms) Error: boom",
    );
    assert.equal(failed?.ok, false);
    assert.equal(failed?.durationMs, 3001);
    assert.equal(
      parseInvocation(
        "2026-11-23T19:00:01Z [Information] Host: Executing 'Functions.scheduler' (Reason='x')",
      ),
      undefined,
    );
    assert.equal(parseInvocation('BENCH_MEMORY {}'), undefined);
  });

  const inv = (fn: string, end: number, durationMs: number): Invocation => ({
    fn,
    ok: true,
    end,
    durationMs,
  });
  const window = [
    inv('submitOrder', 1_010, 40),
    inv('scheduler', 1_030, 20),
    inv('scheduler', 1_060, 10),
    inv('inventoryAgent', 1_050, 30),
    inv('supervisor', 5_000, 5),
  ];

  it('counts executions per order and per function inside a window', () => {
    const mine = within(window, 0, 2_000);
    assert.equal(mine.length, 4);
    assert.deepEqual(executionsPer(mine, 2), { submitOrder: 0.5, scheduler: 1, inventoryAgent: 0.5 });
    assert.throws(() => executionsPer(mine, 0), RangeError);
  });

  it('p50 and p95 per function', () => {
    assert.deepEqual(durationsByFunction(window).scheduler, { p50: 10, p95: 20 });
  });

  it('billed alone vs overlapping on one instance', () => {
    const mine = within(window, 0, 2_000);
    // Alone: four executions, 1 s minimum each.
    assert.equal(billedAloneMs(mine, prices), 4_000);
    // Together they span 970..1060 (touching counts as overlap): one period, billed 1 s, for 100 ms of execution.
    assert.equal(overlapFactor(mine, prices), 1000 / 100);
    assert.ok(Number.isNaN(overlapFactor([], prices)));
  });
});

describe('host memory', () => {
  it('reads probe lines and keeps the peak per section', () => {
    const rec = new MemoryRecorder();
    const line = (rss: number, heapUsed: number) =>
      `[host] BENCH_MEMORY ${JSON.stringify({ at: 1, rss, heapUsed, heapTotal: heapUsed * 2, external: 1, arrayBuffers: 0 })}`;
    rec.onLine(line(100 * 2 ** 20, 40 * 2 ** 20));
    rec.section = 'load';
    rec.onLine(line(150 * 2 ** 20, 30 * 2 ** 20));
    rec.onLine(line(120 * 2 ** 20, 60 * 2 ** 20));
    rec.onLine('[host] something else');
    assert.equal(rec.peaks()['start-up'].rssMB, 100);
    assert.deepEqual(rec.peaks().load, {
      samples: 2,
      rssMB: 150,
      heapUsedMB: 60,
      heapTotalMB: 120,
      externalMB: 1 / 2 ** 20,
    });
    assert.equal(rec.overall()?.samples, 3);
    assert.equal(peakOf([]), undefined);
    assert.equal(parseMemorySample('BENCH_MEMORY {"at":1}'), undefined);
    assert.equal(parseMemorySample('BENCH_MEMORY not json'), undefined);
  });

  it('reads VmHWM and VmRSS from /proc status text, and from this very process', () => {
    assert.deepEqual(parseProcStatus('Name:\tnode\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n'), {
      hwmMB: 200,
      rssMB: 100,
    });
    assert.equal(parseProcStatus('Name:\tnode\n'), undefined);
    const self = readProcStatus(process.pid);
    if (process.platform === 'linux') {
      assert.ok(self && self.hwmMB >= self.rssMB && self.rssMB > 10, JSON.stringify(self));
    }
    assert.equal(readProcStatus(2 ** 30), undefined);
  });
});
