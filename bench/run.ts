import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { startBenchStack } from './benchStack.js';
import { measureIdle, measureScenario, measureSubmission, scenarios, type ScenarioResult } from './cost.js';
import { measureRecovery } from './recovery.js';
import { checkBudget, formatTable } from './stats.js';
import { measureSweepScaling } from './sweepScaling.js';
import { floorRecipe, measureActual, measureFloor, type RunFigures } from './throughput.js';

/**
 * `npm run bench [-- --quick]`: cost per order, idle cost, throughput and latency beside the
 * floor, sweep scaling and recovery, on the local stack; prints tables and writes the same
 * figures to bench/results/latest.json. Everything is compared within one run.
 */
const quick = process.argv.includes('--quick');
const stepTimeoutSeconds = 3;
const sweepIntervalSeconds = 1;
const settings = {
  STEP_TIMEOUT_SECONDS: String(stepTimeoutSeconds),
  SUPERVISOR_SCHEDULE: `*/${sweepIntervalSeconds} * * * * *`,
  FAILURE_SOFT_THRESHOLD: '3',
  FAILURE_HARD_THRESHOLD: '5',
  EXTENDED_BACKOFF_SECONDS: '2',
};
const plan = quick
  ? {
      costRuns: { success: 3, retried: 2, compensated: 2 },
      idleMs: 10_000,
      throughput: [
        { n: 1, orders: 8 },
        { n: 4, orders: 16 },
        { n: 16, orders: 32 },
      ],
      recovery: { isolated: 4, orders: 10, concurrency: 5 },
      sweep: { inFlight: 100, terminal: 10_000, repeats: 3 },
    }
  : {
      costRuns: { success: 5, retried: 3, compensated: 3 },
      idleMs: 60_000,
      throughput: [
        { n: 1, orders: 30 },
        { n: 4, orders: 100 },
        { n: 16, orders: 300 },
      ],
      recovery: { isolated: 10, orders: 40, concurrency: 8 },
      sweep: { inFlight: 100, terminal: 100_000, repeats: 5 },
    };

const log = (line: string) => process.stdout.write(`${line}\n`);
const ms = (v: number) => Math.round(v);

async function main(): Promise<void> {
  const started = new Date();
  log(
    `bench ${quick ? '--quick' : '(full)'}: ${cpus().length} cores, Node ${process.version}, ${started.toISOString()}`,
  );
  const bench = await startBenchStack(settings);
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

    // 1. Cost per order.
    log('\n== 1. Cost per order (counted at the servers; mean over runs) ==');
    const submission = await measureSubmission(bench, 3);
    const costs: ScenarioResult[] = [];
    for (const name of ['success', 'retried', 'compensated'] as const) {
      costs.push(await measureScenario(bench, name, plan.costRuns[name]));
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
    results.cost = {
      submission,
      scenarios: costs,
      budgets,
      scenarioDescriptions: Object.fromEntries(Object.entries(scenarios).map(([k, v]) => [k, v.what])),
    };

    // Idle cost.
    log(`\n== Idle cost (no orders, ${plan.idleMs / 1000} s window, extrapolated per hour) ==`);
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
    results.idle = idle;

    // 2. Throughput and latency beside the floor.
    const recipe = floorRecipe(costs[0].cost);
    log(`\n== 2. Throughput and time to terminal (instant remote services) vs floor ==`);
    log(
      `floor per order: ${JSON.stringify(recipe)} (raw TableClient / ServiceBusSender+Receiver ops, through the same proxies)`,
    );
    const tp: Array<{ actual: RunFigures; floor: RunFigures }> = [];
    for (const { n, orders } of plan.throughput) {
      const actual = await measureActual(bench, n, orders);
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

    // 4. Recovery (before the sweep seeding loads Azurite with history).
    const boundMs = (stepTimeoutSeconds + sweepIntervalSeconds) * 1000;
    log(
      `\n== 4. Recovery from an Agent that dies mid-call (hang past complete-by), ${plan.recovery.orders} orders ==`,
    );
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
