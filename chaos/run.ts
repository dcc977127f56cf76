import { rmSync } from 'node:fs';
import { isTerminal, orderWorkflow, type OrderState, type ProcessState } from '../shared/domain/index.js';
import {
  chaosSettings,
  closeContext,
  drain,
  listAllOrderIds,
  lostOrderBound,
  openContext,
  readQueues,
  sleep,
  type ChaosContext,
} from './harness.js';
import { checkInvariants, hasWaitingSteps, type CheckInput, type CheckResult } from './invariants.js';
import { scenarios, type Scenario } from './scenarios.js';

/**
 * The chaos runner: each scenario on a fresh local stack (host and Azurite as child processes, the
 * emulator and the demo services in this process), many orders, deliberate damage, a bounded drain,
 * then every invariant of DESIGN.md. One row per scenario and a last line `violations: N`.
 *
 *   npm run chaos               all scenarios, 200 orders each (at least 200 in a full run)
 *   npm run chaos -- --quick    the quick subset, 12 orders each
 *   options: --orders N, --only name[,name], --verbose
 */
/** Orders per scenario in a full run; `--orders` may not go below it unless `--only` or `--quick`. */
export const fullRunOrders = 200;

/** A run asked for something it cannot do: one line, exit 2, before anything starts. */
export class ChaosUsageError extends Error {
  override name = 'ChaosUsageError';
}

export interface ChaosOptions {
  quick?: boolean;
  orders?: number;
  only?: string[];
  verbose?: boolean;
  /** Where rows go; default stdout. */
  out?: (line: string) => void;
}

export interface ScenarioRow {
  scenario: string;
  note: string;
  /** Preconditions the scenario failed to arrange: the run is inconclusive there, not failed. */
  unmet: string[];
  boundSeconds: number;
  result: CheckResult;
  seconds: number;
}

export interface ChaosReport {
  rows: ScenarioRow[];
  violations: number;
  /** Scenarios that could not arrange a precondition (see Scenario.check's `unmet`). */
  inconclusive: number;
  lines: string[];
}

/** Samples the state of every submitted order until stopped: the transitions invariant 5 checks. */
function startObserver(ctx: ChaosContext, observed: Map<string, ProcessState[]>) {
  let stopped = false;
  const record = (s: OrderState): void => {
    const seen = observed.get(s.orderId) ?? [];
    if (seen[seen.length - 1] !== s.processState) seen.push(s.processState);
    observed.set(s.orderId, seen);
  };
  const loop = (async () => {
    while (!stopped) {
      for (const orderId of [...ctx.submitted.keys()]) {
        if (stopped) break;
        const seen = observed.get(orderId);
        if (seen && isTerminal(seen[seen.length - 1])) continue;
        const loaded = await ctx.store.load(orderId).catch(() => null);
        if (loaded) record(loaded.state);
      }
      await sleep(300);
    }
  })();
  return {
    record,
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

async function runScenario(scenario: Scenario, n: number, verbose: boolean): Promise<ScenarioRow> {
  const started = Date.now();
  const appRoot = scenario.appRoot?.();
  try {
    return await runOnStack(scenario, n, verbose, appRoot, started);
  } finally {
    if (appRoot) rmSync(appRoot, { recursive: true, force: true });
  }
}

async function runOnStack(
  scenario: Scenario,
  n: number,
  verbose: boolean,
  appRoot: string | undefined,
  started: number,
): Promise<ScenarioRow> {
  const settings = { ...chaosSettings, ...scenario.settings };
  const outage =
    typeof scenario.outageSeconds === 'function' ? scenario.outageSeconds(n) : (scenario.outageSeconds ?? 0);
  const bound = lostOrderBound(settings, orderWorkflow.steps.length, outage);
  const ctx = await openContext({
    persistent: scenario.persistent,
    settings: scenario.settings,
    verbose,
    appRoot,
    captureLog: scenario.captureLog,
  });
  try {
    const observed = new Map<string, ProcessState[]>();
    const observer = startObserver(ctx, observed);
    let note: string;
    try {
      note = await scenario.run(ctx, n);
    } finally {
      await observer.stop();
    }
    const lastSubmission = Math.max(0, ...[...ctx.submitted.values()].map((s) => s.at));
    const finals = await drain(ctx, lastSubmission + bound.seconds * 1000, observer.record);
    // Let late duplicates and stragglers land before reading the ledgers and the queues.
    await sleep(1500);
    // The scenario's own proof that its damage really happened (waits for it, bounded).
    const own = scenario.check ? await scenario.check(ctx) : undefined;
    if (own?.note) note += `; ${own.note}`;
    const [stored, queues, waiting] = await Promise.all([
      listAllOrderIds(ctx),
      readQueues(ctx),
      readWaitingHistories(ctx, finals),
    ]);
    const result = checkInvariants({
      ctx,
      finals,
      stored,
      observed,
      deadLetters: queues.deadLetters,
      alerts: queues.alerts,
      boundSeconds: bound.seconds,
      waiting,
    });
    result.violations.push(...(own?.violations ?? []));
    // Faults the system must ride out may slow an order down, never end it.
    const errors = result.byState.Error ?? 0;
    if (scenario.recoverable && errors > 0) {
      const sample = [...finals.values()]
        .filter((s) => s.processState === 'Error')
        .slice(0, 3)
        .map(
          (s) =>
            `${s.orderId}: ${s.errorDetail} [${s.steps.map((st) => `${st.name} ${st.status} x${st.attempt}`).join(', ')}]`,
        );
      result.violations.push(
        `recoverable faults only, yet ${errors} order(s) ended in Error, e.g. ${sample.join('; ')}`,
      );
    }
    if (ctx.refused > 0) note += `; ${ctx.refused} POSTs never acknowledged`;
    if (ctx.doorRefusals > 0) note += `; ${ctx.doorRefusals} door refusals (503, retried)`;
    return {
      scenario: scenario.name,
      note,
      unmet: own?.unmet ?? [],
      boundSeconds: bound.seconds,
      result,
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    await closeContext(ctx);
  }
}

/** The history and order document of every order whose version has waiting steps (invariant 8). */
async function readWaitingHistories(
  ctx: ChaosContext,
  finals: Map<string, OrderState>,
): Promise<NonNullable<CheckInput['waiting']>> {
  const out: NonNullable<CheckInput['waiting']> = new Map();
  const ids = [...finals.values()].filter(hasWaitingSteps).map((s) => s.orderId);
  for (let i = 0; i < ids.length; i += 20) {
    await Promise.all(
      ids.slice(i, i + 20).map(async (orderId) => {
        const history: NonNullable<Awaited<ReturnType<typeof ctx.store.history>>>['items'] = [];
        let token: string | undefined;
        do {
          const page = await ctx.store.history(orderId, 500, token);
          if (!page) break;
          history.push(...page.items);
          token = page.continuationToken;
        } while (token);
        const loaded = await ctx.store.load(orderId);
        out.set(orderId, { order: loaded?.order, history });
      }),
    );
  }
  return out;
}

/** A column of `width`, always followed by at least one space, so a long value never runs into the next. */
function pad(s: string | number, width: number): string {
  return `${String(s).padEnd(width - 1)} `;
}

const header =
  pad('scenario', 30) +
  pad('orders', 7) +
  pad('terminal', 9) +
  pad('lost', 5) +
  pad('phantom', 8) +
  pad('dup fx', 7) +
  pad('comp faults', 12) +
  pad('tombst', 7) +
  pad('inDoubt', 8) +
  pad('trans', 6) +
  pad('DLQ', 4) +
  pad('DLQ bad', 8) +
  pad('worst/bound s', 15) +
  pad('outcomes', 36) +
  'note';

function formatRow(r: ScenarioRow): string {
  const x = r.result;
  const outcomes = Object.entries(x.byState)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return (
    pad(r.scenario, 30) +
    pad(x.orders, 7) +
    pad(x.terminal, 9) +
    pad(x.lost, 5) +
    pad(x.phantoms, 8) +
    pad(x.duplicateEffects, 7) +
    pad(x.compensationFaults, 12) +
    pad(x.tombstones, 7) +
    pad(x.inDoubtCompensations, 8) +
    pad(x.transitionFaults, 6) +
    pad(x.deadLettered, 4) +
    pad(x.deadLetterFaults, 8) +
    pad(`${x.worstSeconds.toFixed(1)}/${r.boundSeconds}`, 15) +
    pad(outcomes, 36) +
    `${r.note} (${r.seconds.toFixed(0)} s)`
  );
}

export async function main(options: ChaosOptions = {}): Promise<ChaosReport> {
  const lines: string[] = [];
  const out = (line: string): void => {
    lines.push(line);
    (options.out ?? ((l: string) => process.stdout.write(`${l}\n`)))(line);
  };
  const n = options.orders ?? (options.quick ? 12 : fullRunOrders);
  const chosen = scenarios.filter((s) =>
    options.only ? options.only.includes(s.name) : options.quick ? s.quick : true,
  );
  if (!options.quick && !options.only && n < fullRunOrders)
    throw new Error(`a full run uses at least ${fullRunOrders} orders per scenario (got ${n})`);
  if (chosen.length === 0) throw new Error(`no scenario matches ${options.only?.join(', ')}`);
  const tooFew = chosen.filter((s) => s.minOrders !== undefined && n < s.minOrders);
  if (tooFew.length > 0)
    throw new ChaosUsageError(
      `${tooFew.map((s) => `${s.name} needs at least ${s.minOrders} orders`).join('; ')} ` +
        `to arrange its preconditions (got --orders ${n}); nothing was run`,
    );
  const bound = lostOrderBound(chaosSettings, orderWorkflow.steps.length);
  out(`chaos: ${options.quick ? 'quick' : 'full'} run, ${chosen.length} scenarios, ${n} orders each`);
  out(
    `settings: ${Object.entries(chaosSettings)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
  );
  out(`lost-order bound: ${bound.formula} (plus each scenario's deliberate outage)`);
  out(header);
  const rows: ScenarioRow[] = [];
  let violations = 0;
  let inconclusive = 0;
  const details: string[] = [];
  for (const scenario of chosen) {
    let row: ScenarioRow;
    try {
      row = await runScenario(scenario, n, options.verbose ?? false);
    } catch (e) {
      violations += 1;
      out(`${pad(scenario.name, 30)}FAILED TO RUN: ${(e as Error).stack ?? String(e)}`);
      continue;
    }
    rows.push(row);
    out(formatRow(row));
    violations += row.result.violations.length;
    // Per scenario, at most 20 lines: one scenario's hundreds of late orders must not hide another's.
    const own = row.result.violations;
    if (own.length > 0) details.push(`  ${scenario.name}: ${own.length} violation(s)`);
    for (const v of own.slice(0, 20)) details.push(`    ${v}`);
    if (own.length > 20) details.push(`    ... and ${own.length - 20} more`);
    if (row.unmet.length > 0) {
      inconclusive += 1;
      details.push(`  ${scenario.name}: inconclusive, preconditions not met (not product violations)`);
      for (const u of row.unmet) details.push(`    ${u}`);
    }
  }
  if (details.length > 0) {
    out('in detail:');
    for (const d of details) out(d);
  }
  if (inconclusive > 0) out(`inconclusive: ${inconclusive}`);
  out(`violations: ${violations}`);
  return { rows, violations, inconclusive, lines };
}

function parseArgs(argv: string[]): ChaosOptions {
  const options: ChaosOptions = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--quick') options.quick = true;
    else if (a === '--verbose') options.verbose = true;
    else if (a === '--orders') options.orders = Number(argv[++i]);
    else if (a === '--only') options.only = argv[++i].split(',');
    else throw new Error(`unknown argument ${a} (use --quick, --orders N, --only a,b, --verbose)`);
  }
  if (options.orders !== undefined && (!Number.isInteger(options.orders) || options.orders < 1))
    throw new Error('--orders needs a positive integer');
  return options;
}

if (require.main === module) {
  main(parseArgs(process.argv.slice(2))).then(
    (report) => process.exit(report.violations === 0 && report.inconclusive === 0 ? 0 : 1),
    (e: unknown) => {
      const usage = e instanceof ChaosUsageError;
      process.stderr.write(`${usage ? `chaos: ${e.message}` : ((e as Error).stack ?? String(e))}\n`);
      process.exit(2);
    },
  );
}
