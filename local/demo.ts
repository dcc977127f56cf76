import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { ProcessState } from '../shared/domain/index.js';
import { localAppSettings, randomPorts, startStack, type Stack } from './stack.js';
import { orderApiClient, sampleOrder, waitForTerminal, type OrderStatus } from './orderClient.js';
import {
  batchOf,
  faultScenarios,
  secondsToExhaustRetries,
  timingFromSettings,
  type FaultScenario,
} from './faultScenarios.js';
import type { LedgerSnapshot } from './remoteServices/index.js';

/**
 * `npm run demo`: a batch of orders with a mix of injected faults, watched live until every
 * order is terminal, then a summary. Runs against `npm start` when one answers (found through
 * <data-dir>/function-key and stack.json, or --url/--key), otherwise on its own stack on random
 * ports with short timeouts. Exits 0 only if every order ended in the state its faults predict.
 */

export interface DemoOptions {
  count: number;
  url?: string;
  key?: string;
  /** Always start a private stack, even if `npm start` is running (tests). */
  ownStack: boolean;
  dataDir: string;
  /** Include the order that times out until the Supervisor gives up, whatever it costs. */
  withExhaustion: boolean;
  deadlineSeconds?: number;
  out: NodeJS.WritableStream & { isTTY?: boolean };
  /** Redraw a table in place; default: when out is a TTY. */
  live?: boolean;
}

/** Short timeouts for the demo's own stack, so even the give-up case ends in seconds. */
export const demoStackSettings: Record<string, string> = {
  SUPERVISOR_SCHEDULE: '*/1 * * * * *',
  STEP_TIMEOUT_SECONDS: '3',
  FAILURE_SOFT_THRESHOLD: '2',
  FAILURE_HARD_THRESHOLD: '3',
  EXTENDED_BACKOFF_SECONDS: '2',
};

const states: ProcessState[] = ['Pending', 'Processing', 'Compensating', 'Processed', 'Compensated', 'Error'];

interface Target {
  baseUrl: string;
  key: string;
  settings: Record<string, string | undefined>;
  ledgers: () => Promise<LedgerSnapshot[]>;
  stop: () => Promise<void>;
  description: string;
}

interface StackInfo {
  baseUrl?: string;
  settings?: Record<string, string>;
  remote?: Record<string, string>;
}

function readJson<T>(file: string): T | undefined {
  try {
    return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as T) : undefined;
  } catch {
    return undefined;
  }
}

async function fetchLedgers(urls: string[]): Promise<LedgerSnapshot[]> {
  const out: LedgerSnapshot[] = [];
  for (const url of urls) {
    try {
      const response = await fetch(`${url}/_admin/ledger`, { signal: AbortSignal.timeout(5000) });
      if (response.ok) out.push((await response.json()) as LedgerSnapshot);
    } catch {
      // Not reachable (another machine, other ports): the summary leaves the ledger lines out.
    }
  }
  return out;
}

class DemoError extends Error {}

async function findTarget(o: DemoOptions, log: (line: string) => void): Promise<Target> {
  if (!o.ownStack) {
    const explicitUrl = o.url !== undefined;
    const baseUrl = (o.url ?? 'http://127.0.0.1:7071/api').replace(/\/+$/, '');
    const key =
      o.key ?? process.env.FUNCTIONS_LOCAL_KEY ?? readFileSync0(join(o.dataDir, 'function-key'))?.trim();
    const probe = key
      ? await orderApiClient(baseUrl, key).probe()
      : await orderApiClient(baseUrl, '').probe();
    if (probe === 'ok' && key) {
      const info = readJson<StackInfo>(join(o.dataDir, 'stack.json'));
      const same = info?.baseUrl?.replace(/\/+$/, '') === baseUrl;
      return {
        baseUrl,
        key,
        settings: same && info?.settings ? info.settings : localAppSettings,
        ledgers: () => fetchLedgers(same && info?.remote ? Object.values(info.remote) : []),
        stop: async () => undefined,
        description: `the running stack at ${baseUrl}`,
      };
    }
    if (probe === 'unauthorized' || (probe === 'ok' && !key)) {
      throw new DemoError(
        `${baseUrl} answers but refuses the function key; pass --key <key> (npm start prints it)`,
      );
    }
    if (explicitUrl) throw new DemoError(`nothing answers at ${baseUrl}; start it with npm start`);
  }
  log('No running stack found: starting one on random ports with short timeouts...');
  const stack: Stack = await startStack({ ports: randomPorts, settings: demoStackSettings });
  return {
    baseUrl: stack.baseUrl,
    key: stack.functionKey,
    settings: stack.env,
    ledgers: async () => [
      stack.remote.inventory.ledger(),
      stack.remote.payment.ledger(),
      stack.remote.shipping.ledger(),
    ],
    stop: () => stack.stop(),
    description: 'its own stack (random ports)',
  };
}

function readFileSync0(file: string): string | undefined {
  return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The table of counts per scenario and state: redrawn in place on a terminal. */
function progressTable(
  batch: FaultScenario[],
  ids: string[],
  latest: ReadonlyMap<string, OrderStatus>,
  elapsedMs: number,
): string[] {
  const kinds = [...new Set(batch.map((s) => s.kind))];
  const head = ['scenario'.padEnd(24), 'expect'.padEnd(12), ...states.map((s) => s.padStart(13))];
  const rows = [head.join('')];
  const totals = new Map<string, number>(states.map((s) => [s, 0]));
  for (const kind of kinds) {
    const counts = new Map<string, number>(states.map((s) => [s, 0]));
    let expect = '';
    batch.forEach((s, i) => {
      if (s.kind !== kind) return;
      expect = s.expect;
      const state = latest.get(ids[i])?.processState ?? 'Pending';
      counts.set(state, (counts.get(state) ?? 0) + 1);
      totals.set(state, (totals.get(state) ?? 0) + 1);
    });
    rows.push(
      [
        kind.padEnd(24),
        expect.padEnd(12),
        ...states.map((s) => String(counts.get(s) || '.').padStart(13)),
      ].join(''),
    );
  }
  const terminal = ids.filter((id) =>
    ['Processed', 'Compensated', 'Error'].includes(latest.get(id)?.processState ?? ''),
  ).length;
  rows.push(
    [
      `all (${terminal}/${ids.length} terminal)`.padEnd(24),
      seconds(elapsedMs).padEnd(12),
      ...states.map((s) => String(totals.get(s)).padStart(13)),
    ].join(''),
  );
  return rows;
}

export async function runDemo(o: DemoOptions): Promise<number> {
  const write = (line = '') => o.out.write(`${line}\n`);
  const live = o.live ?? Boolean(o.out.isTTY);
  let target: Target;
  try {
    target = await findTarget(o, write);
  } catch (e) {
    write(`demo: ${(e as Error).message}`);
    return 1;
  }
  try {
    const timing = timingFromSettings(target.settings);
    const exhaustSeconds = secondsToExhaustRetries(timing);
    const includeExhaustion = o.withExhaustion || exhaustSeconds <= 60;
    const scenarios = faultScenarios(timing, includeExhaustion);
    const batch = batchOf(scenarios, o.count);
    const deadlineSeconds =
      o.deadlineSeconds ??
      Math.ceil(
        Math.max(60, 3 * (timing.stepTimeoutSeconds + timing.supervisorPeriodSeconds) + 30) +
          (includeExhaustion ? exhaustSeconds * 1.5 : 0),
      );
    write(`Demo: ${batch.length} orders against ${target.description}.`);
    write(
      `Settings: step timeout ${timing.stepTimeoutSeconds} s, Supervisor every ${timing.supervisorPeriodSeconds} s, ` +
        `failure thresholds ${timing.failureSoftThreshold}/${timing.failureHardThreshold}, back-off ${timing.extendedBackoffSeconds} s; deadline ${deadlineSeconds} s.`,
    );
    for (const s of scenarios) write(`  ${s.kind.padEnd(24)} -> ${s.expect.padEnd(12)} ${s.description}`);
    if (!includeExhaustion) {
      write(
        `  (the give-up case is left out: about ${exhaustSeconds} s with these settings; --with-exhaustion adds it)`,
      );
    }
    write();

    const client = orderApiClient(target.baseUrl, target.key);
    const run = randomBytes(4).toString('hex');
    const started = Date.now();
    const ids: string[] = new Array(batch.length);
    let next = 0;
    const submitOne = async (): Promise<void> => {
      while (next < batch.length) {
        const i = next++;
        const submitted = await client.submit(
          sampleOrder(`demo-${run}-${i}`, batch[i].skus),
          `demo-${run}-${i}`,
        );
        ids[i] = submitted.orderId;
      }
    };
    await Promise.all(Array.from({ length: 6 }, submitOne));
    write(`Submitted ${batch.length} orders (202 each) in ${seconds(Date.now() - started)}.`);

    let drawn = 0;
    let lastPlain = -Infinity;
    let printedLastRound = false;
    const draw = (latest: ReadonlyMap<string, OrderStatus>, force: boolean) => {
      const elapsed = Date.now() - started;
      printedLastRound = live || force || elapsed - lastPlain >= 2000;
      if (!printedLastRound) return;
      if (live) {
        const rows = progressTable(batch, ids, latest, elapsed);
        if (drawn) o.out.write(`\x1b[${drawn}A`);
        o.out.write(rows.map((r) => `\x1b[2K${r}\n`).join(''));
        drawn = rows.length;
      } else {
        lastPlain = elapsed;
        const counts = states.map(
          (s) => `${s} ${[...latest.values()].filter((v) => v.processState === s).length}`,
        );
        write(`[${seconds(elapsed).padStart(7)}] ${counts.join('  ')}`);
      }
    };
    const finals = await waitForTerminal(client, ids, {
      deadline: started + deadlineSeconds * 1000,
      pollMs: 500,
      onRound: (latest) => draw(latest, false),
    });
    if (!printedLastRound) draw(finals, true);
    const elapsed = Date.now() - started;
    write();
    return await summarize(write, batch, ids, finals, elapsed, await target.ledgers());
  } catch (e) {
    write(`demo: ${(e as Error).message}`);
    return 1;
  } finally {
    await target.stop();
  }
}

async function summarize(
  write: (line?: string) => void,
  batch: FaultScenario[],
  ids: string[],
  finals: Map<string, OrderStatus>,
  elapsedMs: number,
  ledgers: LedgerSnapshot[],
): Promise<number> {
  const views = ids.map((id) => finals.get(id));
  write(`Summary (${batch.length} orders, ${seconds(elapsedMs)}):`);
  write(
    `  final states   ${states.map((s) => `${s} ${views.filter((v) => v?.processState === s).length}`).join('  ')}`,
  );
  const failureCounts = views.map((v) => v?.failureCount ?? 0);
  write(
    `  timeouts       ${failureCounts.reduce((a, b) => a + b, 0)} in total (Supervisor retries); ` +
      `${failureCounts.filter((f) => f > 0).length} order(s) timed out at least once; max failure count ${Math.max(0, ...failureCounts)}`,
  );
  const stepStatuses = views.flatMap((v) => v?.steps.map((s) => s.status) ?? []);
  write(
    `  compensations  ${stepStatuses.filter((s) => s === 'Compensated').length} step(s) compensated, ` +
      `${stepStatuses.filter((s) => s === 'CompensationFailed').length} compensation(s) failed`,
  );
  const durations = views
    .filter((v): v is OrderStatus => !!v && ['Processed', 'Compensated', 'Error'].includes(v.processState))
    .map((v) => Date.parse(v.updatedAt) - Date.parse(v.createdAt))
    .sort((a, b) => a - b);
  write(
    `  time to terminal  p50 ${seconds(percentile(durations, 50))}  p95 ${seconds(percentile(durations, 95))}  max ${seconds(durations.at(-1) ?? NaN)}`,
  );
  for (const l of ledgers) {
    const keys = new Set(l.effects.map((e) => e.idempotencyKey));
    const doubled = l.effects.length - keys.size;
    const faults = Object.entries(l.counts.faultsInjected)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
    write(
      `  ${l.service.padEnd(9)} requests ${l.counts.requests}, effects ${l.counts.effects}, duplicates absorbed ${l.counts.duplicatesAbsorbed}, ` +
        `compensations ${l.counts.compensations}${faults ? `, faults injected: ${faults}` : ''}${doubled ? `, DOUBLE EFFECTS ${doubled}` : ''}`,
    );
  }

  const mismatches: string[] = [];
  batch.forEach((s, i) => {
    const v = views[i];
    if (!v) mismatches.push(`  ${ids[i]} (${s.kind}): never read back`);
    else if (v.processState !== s.expect)
      mismatches.push(
        `  ${ids[i]} (${s.kind}): expected ${s.expect}, got ${v.processState}${v.error ? ` (${v.error.code}: ${v.error.detail})` : ''}`,
      );
    else if (s.expectTimeouts && v.failureCount === 0)
      mismatches.push(`  ${ids[i]} (${s.kind}): expected at least one timeout, failure count is 0`);
  });
  for (const l of ledgers) {
    if (new Set(l.effects.map((e) => e.idempotencyKey)).size !== l.effects.length) {
      mismatches.push(`  ${l.service}: an idempotency key has more than one effect`);
    }
  }
  if (mismatches.length) {
    write(`MISMATCH: ${mismatches.length} order(s) did not end as their faults predict:`);
    for (const m of mismatches) write(m);
    return 1;
  }
  write('Every order ended in the state its faults predict.');
  return 0;
}

function parseDemoArgs(argv: string[], out: DemoOptions['out']): DemoOptions | string {
  const o: DemoOptions = {
    count: 24,
    ownStack: false,
    dataDir: resolve(process.env.LOCAL_DATA_DIR || '.data'),
    withExhaustion: false,
    out,
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].includes('=') ? argv[i].split(/=(.*)/s, 2) : [argv[i], undefined];
    const value = () => inline ?? argv[++i] ?? '';
    const positive = (v: string, max: number) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1 || n > max)
        throw new DemoError(`${flag} must be an integer from 1 to ${max}`);
      return n;
    };
    if (flag === '--count') o.count = positive(value(), 500);
    else if (flag === '--url') o.url = value();
    else if (flag === '--key') o.key = value();
    else if (flag === '--own-stack') o.ownStack = true;
    else if (flag === '--data-dir') o.dataDir = resolve(value());
    else if (flag === '--with-exhaustion') o.withExhaustion = true;
    else if (flag === '--deadline') o.deadlineSeconds = positive(value(), 3600);
    else if (flag === '--plain') o.live = false;
    else if (flag === '--help' || flag === '-h') return demoUsage;
    else throw new DemoError(`unknown option ${argv[i]} (see --help)`);
  }
  return o;
}

export const demoUsage = `usage: npm run demo -- [options]

  --count <n>          orders to submit (default 24)
  --url <api base>     the API to use (default http://127.0.0.1:7071/api if it answers)
  --key <key>          function key (default FUNCTIONS_LOCAL_KEY, else <data-dir>/function-key)
  --data-dir <path>    where npm start keeps function-key and stack.json (default .data)
  --own-stack          always start a private stack on random ports
  --with-exhaustion    include the order that times out until the Supervisor gives up
  --deadline <s>       give up waiting after this many seconds
  --plain              periodic lines instead of a live table
`;

/** The demo's entry point; resolves to the exit status. */
export async function main(argv: string[], out: DemoOptions['out'] = process.stdout): Promise<number> {
  let parsed: DemoOptions | string;
  try {
    parsed = parseDemoArgs(argv, out);
  } catch (e) {
    out.write(`demo: ${(e as Error).message}\n`);
    return 2;
  }
  if (typeof parsed === 'string') {
    out.write(parsed);
    return 0;
  }
  return runDemo(parsed);
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`demo: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}
