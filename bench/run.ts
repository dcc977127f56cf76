import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import type { StatusEventLevel } from '../shared/domain/statusEvents.js';
import { startBenchStack, type BenchStack } from './benchStack.js';
import {
  measureIdle,
  measureScenario,
  measureSubmission,
  scenarios,
  settle,
  type ScenarioName,
  type ScenarioResult,
} from './cost.js';
import { priceKinds, savingPerMillion, type MeasuredKind } from './dollars.js';
import { interval, overlapFactor, parseInvocation, within, type Invocation } from './invocations.js';
import { MemoryRecorder, readProcStatus } from './memory.js';
import { partitionSummary } from './partitionLoad.js';
import {
  alwaysReadyBaselineMonthly,
  billedActivityMs,
  memoryShare,
  parsePriceTable,
  smallestInstance,
} from './pricing.js';
import { measureRecovery } from './recovery.js';
import { checkBudget, formatTable } from './stats.js';
import { measureTracingOverhead } from './tracingOverhead.js';
import { measureListScaling } from './listScaling.js';
import { measureSweepScaling } from './sweepScaling.js';
import { floorRecipe, measureActual, measureFloor, type RunFigures } from './throughput.js';

/**
 * `npm run bench [-- --quick] [--tracing-only] [--cost-only] [--index-partitions=N]`: cost per order (at both status-event levels), idle cost,
 * throughput and latency beside the floor, recovery, the same costs in dollars
 * (bench/prices.json) with the host's peak memory, and sweep scaling, on the local stack; prints
 * tables and writes the same figures to bench/results/latest.json. Everything is compared within
 * one run.
 */
const quick = process.argv.includes('--quick');
/** Only the telemetry on/off comparison (section 2b), for a quick overhead figure. */
const tracingOnly = process.argv.includes('--tracing-only');
/** Only section 1, cost per order (with the load per table partition). */
const costOnly = process.argv.includes('--cost-only');
/** ORDER_INDEX_PARTITIONS for the app (default: the app's); 1 is the state index's layout before the spread. */
const indexPartitions = /^--index-partitions=(\d+)$/.exec(
  process.argv.find((a) => a.startsWith('--index-partitions=')) ?? '',
)?.[1];
const stepTimeoutSeconds = 3;
const sweepIntervalSeconds = 1;
const settings = {
  STEP_TIMEOUT_SECONDS: String(stepTimeoutSeconds),
  SUPERVISOR_SCHEDULE: `*/${sweepIntervalSeconds} * * * * *`,
  FAILURE_SOFT_THRESHOLD: '3',
  FAILURE_HARD_THRESHOLD: '5',
  EXTENDED_BACKOFF_SECONDS: '2',
  STATUS_EVENTS: 'process',
  ...(indexPartitions ? { ORDER_INDEX_PARTITIONS: indexPartitions } : {}),
};
const plan = quick
  ? {
      costRuns: { success: 3, retried: 2, compensated: 2 },
      stepLevelRuns: { success: 2, compensated: 1 },
      idleMs: 10_000,
      throughput: [
        { n: 1, orders: 8 },
        { n: 4, orders: 16 },
        { n: 16, orders: 32 },
      ],
      recovery: { isolated: 4, orders: 10, concurrency: 5 },
      sweep: { inFlight: 100, terminal: 10_000, repeats: 3 },
      list: { small: 100, large: 10_000 },
    }
  : {
      costRuns: { success: 5, retried: 3, compensated: 3 },
      stepLevelRuns: { success: 3, compensated: 2 },
      idleMs: 60_000,
      throughput: [
        { n: 1, orders: 30 },
        { n: 4, orders: 100 },
        { n: 16, orders: 300 },
      ],
      recovery: { isolated: 10, orders: 40, concurrency: 8 },
      sweep: { inFlight: 100, terminal: 100_000, repeats: 5 },
      list: { small: 100, large: 100_000 },
    };

const log = (line: string) => process.stdout.write(`${line}\n`);
const ms = (v: number) => Math.round(v);
const usd = (v: number | null) => (v === null ? '-' : `$${v < 10 ? v.toFixed(2) : v.toFixed(0)}`);

// What the host reports while the bench runs: its invocations and its own memory (a preloaded probe).
const invocations: Invocation[] = [];
const memory = new MemoryRecorder();
const onHostLine = (line: string) => {
  const inv = parseInvocation(line);
  if (inv) invocations.push(inv);
  else memory.onLine(line);
};
const hostEnv = {
  ...settings,
  NODE_OPTIONS: `--require ${resolve(__dirname, 'memoryProbe.js')}`,
};
const appInvocationsIn = (from: number, to: number) =>
  within(invocations, from, to).filter((i) => i.fn !== 'supervisor');

/** Section 1's runs of one kind, with the app's invocations inside their window. */
async function measureKind(
  bench: BenchStack,
  name: ScenarioName,
  runs: number,
  statusEvents: StatusEventLevel,
): Promise<{ result: ScenarioResult; kind: MeasuredKind }> {
  // The order before may still be finishing (its terminal event goes out before its invocation ends).
  await settle(bench);
  await new Promise((r) => setTimeout(r, 300));
  const from = Date.now();
  const result = await measureScenario(bench, name, runs);
  await new Promise((r) => setTimeout(r, 300)); // the host's last lines are still in the pipe
  const kind: MeasuredKind = {
    scenario: name,
    statusEvents,
    runs,
    cost: result.cost,
    invocations: appInvocationsIn(from, Date.now()),
  };
  return { result, kind };
}

/** Peak resident set of the current host process, from the kernel. */
function hostPeak(bench: BenchStack) {
  const pid = bench.stack.host()?.child.pid;
  return pid === undefined ? undefined : readProcStatus(pid);
}

/** Restarts the functions host with another STATUS_EVENTS (same port, same stack). */
async function restartHostWith(bench: BenchStack, level: StatusEventLevel): Promise<void> {
  bench.stack.env.STATUS_EVENTS = level;
  await bench.stack.killHost('SIGTERM');
  await bench.stack.startHost();
  await measureScenario(bench, 'success', 1); // warm-up: clients and links
}

/** 2b. Telemetry on vs off, same stack, same run. */
async function tracingSection(bench: BenchStack, results: Record<string, unknown>): Promise<void> {
  log(`\n== 2b. Throughput with telemetry on vs off (one run, host restarted between modes) ==`);
  memory.section = 'telemetry overhead';
  const overhead = await measureTracingOverhead(bench, plan.throughput.slice(1));
  log(
    formatTable(
      ['N', 'orders', 'off orders/s', 'on orders/s', 'on/off', 'off p50 ms', 'on p50 ms', 'telemetry KiB'],
      overhead.map((o) => [
        o.concurrency,
        o.orders,
        o.off.perSecond,
        o.on.perSecond,
        o.ratio,
        ms(o.off.latency.p50),
        ms(o.on.latency.p50),
        ms(o.telemetryBytes / 1024),
      ]),
      2,
    ),
  );
  for (const o of overhead)
    log(`  telemetry on/off throughput ratio at N=${o.concurrency}: ${o.ratio.toFixed(2)} (target >= 0.9)`);
  results.tracingOverhead = overhead;
}

async function main(): Promise<void> {
  const started = new Date();
  log(
    `bench ${quick ? '--quick' : '(full)'}: ${cpus().length} cores, Node ${process.version}, ${started.toISOString()}`,
  );
  const prices = parsePriceTable(
    JSON.parse(readFileSync(resolve(__dirname, '..', '..', 'bench', 'prices.json'), 'utf8')),
  );
  const bench = await startBenchStack(hostEnv, onHostLine);
  const results: Record<string, unknown> = {
    date: started.toISOString(),
    mode: quick ? 'quick' : 'full',
    machine: {
      cores: cpus().length,
      model: cpus()[0]?.model,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      node: process.version,
    },
    settings,
    method:
      'counted at the servers: an HTTP proxy in front of Azurite tables (every request = one table transaction, $batch = 1) ' +
      "and an AMQP frame-counting proxy in front of the Service Bus emulator, plus the emulator's per-entity counters; " +
      'the app runs unchanged in the local functions host (child process)',
  };
  try {
    // Warm-up: the host's first invocations create clients and tables.
    await measureScenario(bench, 'success', 1);
    if (tracingOnly) return await tracingSection(bench, results);

    // 1. Cost per order.
    log('\n== 1. Cost per order (counted at the servers; mean over runs) ==');
    const submission = await measureSubmission(bench, 3);
    const costs: ScenarioResult[] = [];
    const kinds: MeasuredKind[] = [];
    memory.section = 'cost per order (one at a time)';
    for (const name of ['success', 'retried', 'compensated'] as const) {
      const { result, kind } = await measureKind(bench, name, plan.costRuns[name], 'process');
      costs.push(result);
      kinds.push(kind);
    }
    const steps = 3;
    const rows = [
      [
        'submission only',
        1,
        submission.table.reads,
        submission.table.queries,
        submission.table.writes,
        submission.table.batches,
        submission.table.total,
        submission.serviceBus.sends,
        submission.serviceBus.receives,
        submission.serviceBus.settlements,
      ],
      ...costs.map((c) => [
        c.scenario,
        c.runs,
        c.cost.table.reads,
        c.cost.table.queries,
        c.cost.table.writes,
        c.cost.table.batches,
        c.cost.table.total,
        c.cost.serviceBus.sends,
        c.cost.serviceBus.receives,
        c.cost.serviceBus.settlements,
      ]),
    ];
    log(
      formatTable(
        [
          'order',
          'runs',
          'reads',
          'queries',
          'writes',
          'batches',
          'table tx',
          'SB sends',
          'SB receives',
          'SB settles',
        ],
        rows,
      ),
    );
    const budgets = costs.map((c) => ({ scenario: c.scenario, ...checkBudget(c.cost, submission, steps) }));
    log('\nPer step beyond submission (3 steps) vs budget:');
    log(
      formatTable(
        ['order', 'table tx/step', 'budget', 'ok', 'SB sends/step', 'budget', 'ok'],
        budgets.map((b) => [
          b.scenario,
          b.tablePerStep,
          b.tableBudget,
          b.tableWithin ? 'yes' : 'NO',
          b.sendsPerStep,
          b.sendsBudget,
          b.sendsWithin ? 'yes' : 'NO',
        ]),
        2,
      ),
    );
    log('\nWhere the table transactions and sends go (per order):');
    for (const c of costs)
      log(
        `  ${c.scenario}: ${Object.entries(c.detail)
          .map(([k, v]) => `${k.replace(/^table\./, '')}=${+v.toFixed(2)}`)
          .join(' ')}`,
      );
    log('\nEntities per order per table partition (counted at the proxy; shared partitions first):');
    for (const c of costs) {
      const shared = partitionSummary(c.partitions, c.runs).filter((g) => !g.group.endsWith('{order}'));
      log(`  ${c.scenario} (${c.runs} orders):`);
      log(
        formatTable(
          ['partition', 'partitions', 'written/order', 'max written/order in one', 'read/order'],
          shared.map((g) => [
            g.group,
            g.partitions,
            g.writtenPerOrder,
            g.maxWrittenPerPartitionPerOrder,
            g.readPerOrder,
          ]),
          2,
        ),
      );
    }
    if (costOnly) return;
    // The same orders with STATUS_EVENTS=step: the host restarts with the other level.
    memory.section = 'cost per order, step-level events';
    const peakBeforeRestart = hostPeak(bench);
    await restartHostWith(bench, 'step');
    const stepCosts: ScenarioResult[] = [];
    for (const name of ['success', 'compensated'] as const) {
      const { result, kind } = await measureKind(bench, name, plan.stepLevelRuns[name], 'step');
      stepCosts.push(result);
      kinds.push(kind);
    }
    await restartHostWith(bench, 'process');
    log('\nWith STATUS_EVENTS=step (one event per completed step, and the failed step):');
    log(
      formatTable(
        ['order', 'runs', 'table tx', 'SB sends', 'SB receives', 'SB settles'],
        stepCosts.map((c) => [
          c.scenario,
          c.runs,
          c.cost.table.total,
          c.cost.serviceBus.sends,
          c.cost.serviceBus.receives,
          c.cost.serviceBus.settlements,
        ]),
      ),
    );
    results.cost = {
      submission,
      scenarios: costs,
      stepLevel: stepCosts,
      budgets,
      scenarioDescriptions: Object.fromEntries(Object.entries(scenarios).map(([k, v]) => [k, v.what])),
    };

    // Idle cost.
    log(`\n== Idle cost (no orders, ${plan.idleMs / 1000} s window, extrapolated per hour) ==`);
    memory.section = 'idle';
    const idleFrom = Date.now();
    const idle = await measureIdle(bench, plan.idleMs, 3600 / sweepIntervalSeconds, {
      schedule: '*/30 * * * * * (app default)',
      sweepsPerHour: 120,
    });
    log(
      formatTable(
        ['what', 'in window', 'per hour (bench schedule 1 s)', 'per hour (default 30 s)'],
        [
          [
            'Supervisor runs',
            idle.sweepRuns,
            idle.perHour.benchSchedule.sweeps,
            idle.perHour.configuredSchedule.sweeps,
          ],
          [
            'table transactions',
            idle.tableTransactions,
            idle.perHour.benchSchedule.tableTransactions,
            idle.perHour.configuredSchedule.tableTransactions,
          ],
          ['SB message operations', idle.serviceBusMessageOps, 0, 0],
          [
            'AMQP frames client->broker',
            Object.entries(idle.amqpFrames)
              .filter(([k]) => k.startsWith('out.'))
              .reduce((s, [, v]) => s + v, 0),
            idle.perHour.amqpFramesOut,
            idle.perHour.amqpFramesOut,
          ],
          [
            'AMQP frames broker->client',
            Object.entries(idle.amqpFrames)
              .filter(([k]) => k.startsWith('in.'))
              .reduce((s, [, v]) => s + v, 0),
            idle.perHour.amqpFramesIn,
            idle.perHour.amqpFramesIn,
          ],
        ],
      ),
    );
    log(`  idle AMQP frames by kind: ${JSON.stringify(idle.amqpFrames)}`);
    const idleSweeps = within(invocations, idleFrom, Date.now()).filter((i) => i.fn === 'supervisor');
    results.idle = idle;

    // 2. Throughput and latency beside the floor.
    const recipe = floorRecipe(costs[0].cost);
    log(`\n== 2. Throughput and time to terminal (instant remote services) vs floor ==`);
    log(
      `floor per order: ${JSON.stringify(recipe)} (raw TableClient / ServiceBusSender+Receiver ops, through the same proxies)`,
    );
    const tp: Array<{ actual: RunFigures; floor: RunFigures }> = [];
    // The most loaded run gives the busy end of Flex billing: executions overlapping on one instance.
    let loaded: { n: number; orders: number; invocations: Invocation[] } | undefined;
    for (const { n, orders } of plan.throughput) {
      memory.section = `throughput N=${n}`;
      const from = Date.now();
      const actual = await measureActual(bench, n, orders);
      await new Promise((r) => setTimeout(r, 300));
      loaded = { n, orders, invocations: within(invocations, from, Date.now()) };
      memory.section = `floor N=${n} (host idle)`;
      const floor = await measureFloor(bench, recipe, n, orders);
      tp.push({ actual, floor });
    }

    log(
      formatTable(
        [
          'N',
          'orders',
          'orders/s',
          'floor/s',
          'actual/floor',
          'p50 ms',
          'p95 ms',
          'p99 ms',
          'floor p50',
          'floor p95',
          'floor p99',
          'p50 actual/floor',
        ],
        tp.map(({ actual: a, floor: f }) => [
          a.concurrency,
          a.orders,
          a.perSecond,
          f.perSecond,
          a.perSecond / f.perSecond,
          ms(a.latency.p50),
          ms(a.latency.p95),
          ms(a.latency.p99),
          ms(f.latency.p50),
          ms(f.latency.p95),
          ms(f.latency.p99),
          a.latency.p50 / f.latency.p50,
        ]),
        2,
      ),
    );
    results.throughput = { floorRecipe: recipe, runs: tp };

    await tracingSection(bench, results);

    // 4. Recovery (before the sweep seeding loads Azurite with history).
    const boundMs = (stepTimeoutSeconds + sweepIntervalSeconds) * 1000;
    log(
      `\n== 4. Recovery from an Agent that dies mid-call (hang past complete-by), ${plan.recovery.orders} orders ==`,
    );
    memory.section = 'recovery';
    const isolated = await measureRecovery(bench, plan.recovery.isolated, 1, boundMs);
    const rec = await measureRecovery(bench, plan.recovery.orders, plan.recovery.concurrency, boundMs);
    const recRow = (what: string, r: typeof rec) => [
      what,
      r.recovery.count,
      ms(r.recovery.p50),
      ms(r.recovery.p95),
      ms(r.recovery.p99),
      ms(r.recovery.max),
      boundMs,
      r.inventoryRequests.max,
    ];
    log(
      formatTable(
        [
          'crash -> terminal',
          'orders',
          'p50 ms',
          'p95 ms',
          'p99 ms',
          'max ms',
          'bound ms',
          'max inventory calls',
        ],
        [recRow('one at a time', isolated), recRow(`${plan.recovery.concurrency} at once`, rec)],
      ),
    );
    log(
      `  bound = STEP_TIMEOUT_SECONDS ${stepTimeoutSeconds} s + sweep interval ${sweepIntervalSeconds} s (the re-run of the three steps comes on top)`,
    );
    results.recovery = { isolated, concurrent: rec };
    const peakAfterLoad = hostPeak(bench);
    memory.section = 'sweep scaling (host idle)';

    // 5. Dollars, and the instance size the measured memory needs.
    if (!loaded) throw new Error('no throughput run');
    const factor = overlapFactor(loaded.invocations, prices);
    const busyDirect = billedActivityMs(loaded.invocations.map(interval), prices) / loaded.orders;
    const sizes = prices.flexConsumption.instanceSizesMB;
    const sweepDurations = idleSweeps.map((i) => i.durationMs).sort((a, b) => a - b);
    const sweepMs = sweepDurations[Math.floor(sweepDurations.length / 2)] ?? 0;
    const report = priceKinds({
      kinds,
      overlapFactor: factor,
      idle: { sweepsPerHour: 120, sweepMs, tablePerSweep: idle.tablePerSweep || 1 },
      prices,
      sizesMB: sizes,
    });
    log(`\n== 5. Dollars (bench/prices.json: ${prices.currency}, ${prices.region}, read ${prices.read}) ==`);
    const processSuccess = report.kinds.find(
      (k) => k.scenario === 'success' && k.statusEvents === 'process',
    )!;
    const fns = Object.keys(processSuccess.durations).sort();
    log('Invocation durations measured by the host (ms), one order at a time, STATUS_EVENTS=process:');
    log(
      formatTable(
        ['function', ...report.kinds.map((k) => `${k.scenario}/${k.statusEvents} ex/order`), 'p50', 'p95'],
        fns.map((fn) => [
          fn,
          ...report.kinds.map((k) => k.executions[fn] ?? 0),
          ms(processSuccess.durations[fn].p50),
          ms(processSuccess.durations[fn].p95),
        ]),
        2,
      ),
    );
    log(
      `  busy end: in the N=${loaded.n} run, ${loaded.invocations.length} invocations billed ${ms(busyDirect)} ms of instance time per order; ` +
        `overlap factor ${factor.toFixed(3)} billed ms per ms executed (sparse traffic: at least 1,000 ms per execution)`,
    );
    for (const mb of [2048, 512]) {
      log(
        `\nPer million orders, Flex instance ${mb} MB (on-demand, no free grant; SB at the 13M-100M tier):`,
      );
      log(
        formatTable(
          [
            'order',
            'events',
            'SB ops',
            'SB',
            'table',
            'execs',
            'compute alone p50',
            'alone p95',
            'busy',
            'total alone p50',
            'total alone p95',
            'total busy',
          ],
          report.kinds.map((k) => {
            const m = k.perMillion[mb];
            return [
              k.scenario,
              k.statusEvents,
              k.serviceBusOperations,
              usd(m.serviceBus),
              usd(m.table),
              usd(m.executions),
              usd(m.computeSparseP50),
              usd(m.computeSparseP95),
              usd(m.computeBusy),
              usd(m.totalSparseP50),
              usd(m.totalSparseP95),
              usd(m.totalBusy),
            ];
          }),
        ),
      );
    }
    log('\nA month at rest (no orders; Supervisor every 30 s, each sweep alone on an instance):');
    log(
      formatTable(
        [
          'instance MB',
          'SB base',
          'sweep GB-s',
          'sweeps compute',
          'sweep execs',
          'table',
          'total',
          'after free grant',
        ],
        sizes.map((mb) => {
          const r = report.atRest[mb];
          return [
            mb,
            usd(r.serviceBusBase),
            Math.round(r.supervisorGBSeconds),
            usd(r.supervisorCompute),
            usd(r.supervisorExecutions),
            usd(r.table),
            usd(r.total),
            usd(r.totalAfterFreeGrant),
          ];
        }),
      ),
    );
    log(
      `  sweep duration p50 ${sweepMs} ms over ${sweepDurations.length} idle sweeps; ${idle.tablePerSweep} table tx per sweep`,
    );
    log(
      `  not configured, for comparison: one always-ready instance adds a baseline of ${sizes
        .map((mb) => `${usd(alwaysReadyBaselineMonthly(mb, prices))} (${mb} MB)`)
        .join(', ')} a month, and removes the free grant`,
    );

    // Memory: the host process (the app's only process here) under the bench's loads.
    const peaks = memory.peaks();
    const overall = memory.overall();
    const kernelPeak = Math.max(peakBeforeRestart?.hwmMB ?? 0, peakAfterLoad?.hwmMB ?? 0);
    const peakRss = Math.max(kernelPeak, overall?.rssMB ?? 0);
    const pick = smallestInstance(peakRss, sizes);
    log('\n== Host memory (functions host process: worker + app) ==');
    log(
      formatTable(
        ['section', 'samples', 'peak RSS MB', 'peak heap used MB', 'peak heap total MB', 'peak external MB'],
        Object.entries(peaks).map(([k, p]) => [
          k,
          p.samples,
          p.rssMB,
          p.heapUsedMB,
          p.heapTotalMB,
          p.externalMB,
        ]),
      ),
    );
    log(
      `  kernel peak RSS (VmHWM): ${kernelPeak.toFixed(1)} MB (first host ${peakBeforeRestart?.hwmMB.toFixed(1) ?? '-'} MB, last host, through idle, throughput and recovery ${peakAfterLoad?.hwmMB.toFixed(1) ?? '-'} MB)`,
    );
    const saving = pick ? savingPerMillion(processSuccess, 2048, pick.sizeMB) : undefined;
    log(
      pick
        ? `  smallest Flex size with peak RSS <= ${memoryShare * 100}% of it: ${pick.sizeMB} MB (peak uses ${(pick.usedShare * 100).toFixed(0)}%)` +
            (saving && pick.sizeMB < 2048
              ? `; vs 2,048 MB it saves ${usd(saving.sparseP50)} (alone) / ${usd(saving.busy)} (busy) of compute per million success orders`
              : '')
        : `  no Flex size keeps ${memoryShare * 100}% headroom over ${peakRss.toFixed(0)} MB`,
    );
    results.dollars = {
      prices: { currency: prices.currency, region: prices.region, read: prices.read },
      ...report,
      busyDirectBilledMsPerOrder: busyDirect,
      loadedRun: { n: loaded.n, orders: loaded.orders, invocations: loaded.invocations.length },
      sweepMs,
    };
    results.memory = {
      sections: peaks,
      overall,
      kernelPeakRssMB: kernelPeak,
      peakRssMB: peakRss,
      rule: `peak RSS <= ${memoryShare} x instance memory`,
      smallestInstance: pick,
      savingPerMillionSuccessOrdersVs2048: saving,
    };

    // 3. Sweep scaling.
    log(`\n== 3. Sweep scaling: ${plan.sweep.inFlight} in flight, then + ${plan.sweep.terminal} terminal ==`);
    const sweep = await measureSweepScaling(bench.stack.azurite.connectionString, plan.sweep);
    log(
      formatTable(
        ['case', 'in flight', 'terminal', 'sweep p50 ms', 'max ms', 'entities read', 'requests', 'timed out'],
        [
          [
            'in flight alone',
            sweep.alone.inFlight,
            0,
            ms(sweep.alone.duration.p50),
            ms(sweep.alone.duration.max),
            sweep.alone.entitiesRead,
            sweep.alone.requests,
            sweep.alone.timedOut,
          ],
          [
            'with history',
            sweep.withHistory.inFlight,
            sweep.withHistory.terminal,
            ms(sweep.withHistory.duration.p50),
            ms(sweep.withHistory.duration.max),
            sweep.withHistory.entitiesRead,
            sweep.withHistory.requests,
            sweep.withHistory.timedOut,
          ],
        ],
      ),
    );
    log(
      `  ratio with/without history: duration ${sweep.durationRatio.toFixed(2)}, entities read ${sweep.entitiesReadRatio.toFixed(2)} (seeding took ${ms(sweep.seedMs)} ms)`,
    );
    log(
      `  hourly index reconciliation over that history: ${ms(sweep.reconcile.ms)} ms, ${sweep.reconcile.requests} requests, ${sweep.reconcile.entitiesRead} entities read (O(history) by design, once an hour)`,
    );
    results.sweepScaling = sweep;

    // 3b. The operator's list page: O(page), not O(orders).
    log(`\n== 3b. List page: ${plan.list.small} terminal orders, then ${plan.list.large} ==`);
    const list = await measureListScaling(bench.stack.azurite.connectionString, plan.list);
    log(
      formatTable(
        ['list', 'terminal', 'items', 'entities read', 'requests', 'table scans'],
        [...list.small, ...list.large].map((f) => [
          f.list,
          f.terminal,
          f.items,
          f.entitiesRead,
          f.requests,
          f.tableScans,
        ]),
      ),
    );
    log(
      `  entities read per page, ${plan.list.large} vs ${plan.list.small} terminal: worst ratio ${list.worstRatio.toFixed(2)} (must be <= 1.5; seeding took ${ms(list.seedMs)} ms)`,
    );
    results.listScaling = list;
  } finally {
    await bench.stop();
  }
  const dir = resolve(__dirname, '..', '..', 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'latest.json');
  writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  log(`\nJSON: ${file}  (total ${ms((Date.now() - started.getTime()) / 1000)} s)`);
}

void main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
