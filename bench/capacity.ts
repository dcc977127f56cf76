import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { loadConfig } from '../emulators/servicebus/config.js';
import { startBenchStack, statusFeed } from './benchStack.js';
import {
  binding,
  ceilings,
  familyOf,
  spreadFamily,
  mixLoads,
  monthlyCost,
  ordersPerMonth,
  partitionOperations,
  planFor,
  type Ceiling,
  type Deployment,
  type Layout,
  type OrderLoad,
} from './capacityModel.js';
import {
  idleRates,
  measureOrders,
  orderLoad,
  sharedPartitions,
  type OrderWindow,
  type TopicRules,
} from './capacityLoad.js';
import { measureScenario } from './cost.js';
import { parseInvocation, within, type Invocation } from './invocations.js';
import { parseLimitTable } from './limits.js';
import { parsePriceTable } from './pricing.js';
import { formatTable } from './stats.js';
import { defaultIndexPartitions } from '../shared/stateStore/indexLayout.js';

/**
 * `npm run bench:capacity [-- --quick] [deployment flags]`: what each kind of order does to every
 * shared resource, counted at the servers, and the ceilings that follow from Azure's published
 * limits (bench/limits.json) at a deployment, the binding one, and what the deployment costs
 * (bench/prices.json). Then, for 50 / 500 / 2,000 / 10,000 orders/s, the cheapest deployment that
 * keeps every resource under `--share` of its limit. Writes bench/results/capacity.json.
 *
 * Flags: --tier Standard|Premium, --mu N, --namespaces N, --accounts N, --partitions N (index
 * partitions per state; default: as measured), --instances N, --concurrency N, --memory MB,
 * --mix success=0.98,retried=0.01,compensated=0.01, --share 0.5, --average-share 0.1,
 * --peak N (orders/s for the month's cost), --setting KEY=VALUE (an app setting for the host).
 */
const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const num = (name: string, fallback: number): number => {
  const v = flag(name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, got ${v}`);
  return n;
};
const quick = args.includes('--quick');
const appSettings: Record<string, string> = {};
args.forEach((a, i) => {
  if (a !== '--setting') return;
  const [k, ...v] = (args[i + 1] ?? '').split('=');
  if (!k || v.length === 0) throw new Error(`--setting needs KEY=VALUE, got ${args[i + 1]}`);
  appSettings[k] = v.join('=');
});
const runs = quick
  ? { success: 8, retried: 2, compensated: 3, idleMs: 5_000 }
  : { success: 40, retried: 5, compensated: 10, idleMs: 20_000 };
const settings: Record<string, string> = {
  STEP_TIMEOUT_SECONDS: '3',
  SUPERVISOR_SCHEDULE: '*/1 * * * * *',
  FAILURE_SOFT_THRESHOLD: '3',
  FAILURE_HARD_THRESHOLD: '5',
  EXTENDED_BACKOFF_SECONDS: '2',
  STATUS_EVENTS: 'process',
  ...appSettings,
};
/** The tables whose partitions the index partition setting (and the account count) spread. */
const layout: Layout = { spreadTables: ['OrderIndex'], fixedSpread: { InFlight: 256 } };
const targets = [50, 500, 2000, 10000];
const root = resolve(__dirname, '..', '..');
const log = (line: string) => process.stdout.write(`${line}\n`);
const fmt = (v: number | null, digits = 1) =>
  v === null ? '-' : v >= 100 ? Math.round(v).toLocaleString('en-US') : v.toFixed(digits);
const usd = (v: number) => `$${v < 10 ? v.toFixed(2) : Math.round(v).toLocaleString('en-US')}`;

function parseMix(text: string | undefined): Record<string, number> {
  if (!text) return { success: 1 };
  return Object.fromEntries(
    text.split(',').map((part) => {
      const [k, v] = part.split('=');
      const w = Number(v);
      if (!k || !Number.isFinite(w) || w < 0) throw new Error(`--mix: bad entry ${part}`);
      return [k, w];
    }),
  );
}

/** Filter evaluations per message sent to each topic: every rule of every subscription. */
function topicRules(configPath: string): TopicRules {
  const config = loadConfig(configPath);
  return Object.fromEntries(
    config.topics.map((t) => [
      t.name.toLowerCase(),
      t.subscriptions.reduce((s, sub) => s + sub.rules.length, 0),
    ]),
  );
}

function printLoads(loads: OrderLoad[]): void {
  const names = [
    ...new Set(loads.flatMap((l) => l.sharedPartitions.map((p) => `${p.table}/${p.partition}`))),
  ].sort();
  log(
    '\nShared table partitions (touched by more than one order), per order: entities read / written (requests)',
  );
  log(
    formatTable(
      ['partition', ...loads.map((l) => l.kind)],
      names.map((n) => [
        n,
        ...loads.map((l) => {
          const p = l.sharedPartitions.find((x) => `${x.table}/${x.partition}` === n);
          return p ? `${p.read.toFixed(1)} / ${p.written.toFixed(1)} (${p.requests.toFixed(1)})` : '-';
        }),
      ]),
    ),
  );
  const entities = [...new Set(loads.flatMap((l) => l.entities.map((e) => e.entity)))].sort();
  log(
    '\nService Bus, per order: in (sent) / out (delivered) / settled / filter evaluations [transfer bytes in / out]',
  );
  log(
    formatTable(
      ['entity', ...loads.map((l) => l.kind)],
      [
        ...entities.map((n) => [
          n,
          ...loads.map((l) => {
            const e = l.entities.find((x) => x.entity === n);
            return e
              ? `${e.sent.toFixed(1)} / ${e.received.toFixed(1)} / ${e.settled.toFixed(1)} / ${e.filterEvaluations.toFixed(1)} [${Math.round(e.bytesIn ?? 0)} / ${Math.round(e.bytesOut ?? 0)}]`
              : '-';
          }),
        ]),
        [
          'transfer bytes in / out',
          ...loads.map((l) => `${Math.round(l.bytesIn)} / ${Math.round(l.bytesOut)}`),
        ],
      ],
    ),
  );
  log('\nPer order: table requests (one storage account) and executions per function (median ms)');
  const fns = [...new Set(loads.flatMap((l) => Object.keys(l.executions)))].sort();
  log(
    formatTable(
      ['what', ...loads.map((l) => l.kind)],
      [
        ['table requests', ...loads.map((l) => l.tableRequests.toFixed(1))],
        ...[...new Set(loads.flatMap((l) => Object.keys(l.tableRequestsByTable ?? {})))]
          .sort()
          .map((t) => [
            `  of which ${t}`,
            ...loads.map((l) => (l.tableRequestsByTable?.[t] ?? 0).toFixed(1)),
          ]),
        ...fns.map((f) => [
          `executions ${f}`,
          ...loads.map((l) =>
            l.executions[f] ? `${l.executions[f].toFixed(2)} (${Math.round(l.executionMs[f])} ms)` : '-',
          ),
        ]),
      ],
    ),
  );
}

function printCeilings(title: string, cs: Ceiling[]): void {
  log(`\n${title}`);
  log(
    formatTable(
      ['resource', 'per order', 'unit', 'limit /s', 'source', 'ceiling orders/s'],
      cs.map((c) => [
        c.resource,
        fmt(c.perOrder, 2),
        c.unit,
        fmt(c.limit),
        c.source ?? '',
        fmt(c.ordersPerSecond),
      ]),
    ),
  );
  const b = binding(cs);
  log(`  binding: ${b.resource.trim()} at ${fmt(b.ordersPerSecond)} orders/s`);
}

const describe = (d: Deployment): string =>
  [
    d.serviceBusTier === 'Standard' ? 'SB Standard' : `SB Premium ${d.messagingUnits} MU`,
    d.serviceBusNamespaces > 1
      ? `${d.serviceBusNamespaces} namespaces (orders split by id: not in the app)`
      : '',
    `${d.storageAccounts} storage account${d.storageAccounts > 1 ? 's' : ''}`,
    `${d.indexPartitionsPerState} index partition${d.indexPartitionsPerState > 1 ? 's' : ''}/state`,
    `max ${d.maxInstances} instances`,
  ]
    .filter(Boolean)
    .join(', ');

interface Measured {
  date: string;
  loads: OrderLoad[];
  windows: Array<Pick<OrderWindow, 'kind' | 'orderId' | 'seconds'>>;
  idle: Record<string, number>;
  shared: string[];
  /** The app settings the orders ran with (ORDER_INDEX_PARTITIONS among them). */
  settings?: Record<string, string>;
}

/** Runs the orders one at a time on the local stack and returns each kind's load per order. */
async function measure(serviceBusConfig: string): Promise<Measured> {
  const date = new Date().toISOString();
  const rules = topicRules(serviceBusConfig);
  const invocations: Invocation[] = [];
  const bench = await startBenchStack(settings, (line) => {
    const i = parseInvocation(line);
    if (i) invocations.push(i);
  });
  const windows: OrderWindow[] = [];
  let idle: Record<string, number> = {};
  try {
    await measureScenario(bench, 'success', 1); // warm-up: clients, links, tables
    idle = await idleRates(bench, runs.idleMs);
    log(
      `idle (per second, subtracted from each order's window): ${Object.entries(idle)
        .filter(([k]) => k.startsWith('table.part.') || k === 'table.transactions')
        .map(([k, v]) => `${k.replace(/^table\./, '')}=${v.toFixed(2)}`)
        .join(' ')}`,
    );
    const appInvocations = (from: number, to: number) => within(invocations, from, to);
    for (const kind of ['success', 'retried', 'compensated'] as const) {
      windows.push(...(await measureOrders(bench, kind, runs[kind], idle, appInvocations)));
      log(`  measured ${runs[kind]} ${kind} order(s)`);
    }
  } finally {
    await bench.stop();
  }
  const shared = sharedPartitions(windows, layout);
  const loads = (['success', 'retried', 'compensated'] as const).map((k) =>
    orderLoad(
      k,
      windows.filter((w) => w.kind === k),
      shared,
      rules,
    ),
  );
  return {
    date,
    loads,
    windows: windows.map((w) => ({ kind: w.kind, orderId: w.orderId, seconds: w.seconds })),
    idle,
    shared: [...shared].sort(),
    settings,
  };
}

async function main(): Promise<void> {
  const started = new Date();
  log(
    `bench:capacity ${quick ? '--quick' : '(full)'}: ${cpus().length} cores, Node ${process.version}, ${started.toISOString()}`,
  );
  const limits = parseLimitTable(JSON.parse(readFileSync(join(root, 'bench', 'limits.json'), 'utf8')));
  const prices = parsePriceTable(JSON.parse(readFileSync(join(root, 'bench', 'prices.json'), 'utf8')));
  // --from FILE: the loads of an earlier run, to price other deployments without measuring again.
  const from = flag('from');
  const measured = from
    ? (JSON.parse(readFileSync(resolve(from), 'utf8')) as Measured)
    : await measure(join(root, 'infra', 'servicebus-emulator', 'Config.json'));
  const { loads, windows, idle, shared } = measured;
  if (from) log(`loads from ${from} (measured ${measured.date})`);
  log(`\n== Load per order, counted at the servers (${windows.length} orders, one at a time) ==`);
  log(
    `  (the bench's own ${statusFeed.topic}/${statusFeed.subscription} reader is a client: its receives are left out, its filter evaluations are not)`,
  );
  printLoads(loads);

  // The deployment to price: flags over what infra deploys today.
  const mix = mixLoads(loads, parseMix(flag('mix')));
  const observedPartitions = Math.max(
    1,
    ...[
      ...new Set(
        mix.sharedPartitions
          .filter((p) => layout.spreadTables.includes(p.table))
          .map((p) => `${p.table}/${familyOf(p.partition)}`),
      ),
    ].map((fam) => mix.sharedPartitions.filter((p) => `${p.table}/${familyOf(p.partition)}` === fam).length),
  );
  const tier = flag('tier') ?? 'Standard';
  if (tier !== 'Standard' && tier !== 'Premium')
    throw new Error(`--tier must be Standard or Premium, got ${tier}`);
  const deployment: Deployment = {
    serviceBusTier: tier,
    messagingUnits: tier === 'Premium' ? num('mu', 1) : 0,
    serviceBusNamespaces: num('namespaces', 1),
    storageAccounts: num('accounts', 1),
    // The layout the orders ran with, not the partition names a few orders happened to touch.
    indexPartitionsPerState: num(
      'partitions',
      Number(
        measured.settings?.ORDER_INDEX_PARTITIONS ??
          settings.ORDER_INDEX_PARTITIONS ??
          defaultIndexPartitions,
      ),
    ),
    maxInstances: num('instances', limits.value('flexMaximumInstanceCountDefault')),
    perInstanceConcurrency: num('concurrency', 16),
    instanceMemoryMB: num('memory', 512),
  };
  const share = num('share', 0.5);
  const averageShare = num('average-share', 0.1);
  const cs = ceilings(mix, deployment, limits, layout);
  printCeilings(
    `== Ceilings for ${mix.kind} at: ${describe(deployment)} (limits read ${limits.read}) ==`,
    cs,
  );
  log(
    `  index partitions per state as measured: ${observedPartitions} partition name(s) per state family seen`,
  );
  const b = binding(cs);
  const peak = num('peak', Math.max(1, Math.floor((b.ordersPerSecond as number) * share)));
  const cost = monthlyCost(mix, deployment, ordersPerMonth(peak, averageShare, prices), prices);
  log(
    `  month at a peak of ${fmt(peak)} orders/s, averaging ${averageShare * 100}% of it (${fmt(cost.ordersPerMonth / 1e6)}M orders): ` +
      `${usd(cost.total)} (Service Bus ${usd(cost.serviceBus)}, tables ${usd(cost.table)}, executions ${usd(cost.executions)}, compute ${usd(cost.compute)}; ` +
      `fixed ${usd(cost.fixed)}), ${usd(cost.perMillionOrders)} per million orders`,
  );
  for (const kind of loads) {
    const kb = binding(ceilings(kind, deployment, limits, layout));
    log(`  ${kind.kind} orders alone: binding ${kb.resource.trim()} at ${fmt(kb.ordersPerSecond)} orders/s`);
  }

  // What stays shared once the index and the in-flight rows are spread: each must stay under half
  // its limit at the highest target, whatever is bought (DESIGN.md "Scale").
  const top = targets[targets.length - 1];
  const partitionLimit = limits.value('tablePartitionEntitiesPerSecond');
  const unspread = mix.sharedPartitions.filter(
    (p) => spreadFamily(layout, p.table, p.partition) === undefined,
  );
  const clockDriven = Object.entries(idle)
    .map(([k, v]) => [/^table\.part\.(.+)\.requests$/.exec(k)?.[1], v] as const)
    .filter((e): e is readonly [string, number] => e[0] !== undefined);
  log(
    `\n== Shared beyond the spread tables, at ${fmt(top)} orders/s (half of a partition's target: ${fmt(partitionLimit / 2)} entities/s) ==`,
  );
  log(
    formatTable(
      ['partition', 'per order', 'at the target /s', 'share of limit'],
      [
        ...unspread.map((p) => {
          const perSecond = partitionOperations(p) * top;
          return [
            `${p.table}/${p.partition}`,
            fmt(partitionOperations(p), 3),
            fmt(perSecond),
            `${fmt((perSecond / partitionLimit) * 100)} %`,
          ];
        }),
        ...clockDriven.map(([name, perSecond]) => [
          `${name} (on a clock, per Supervisor)`,
          '-',
          `${perSecond.toFixed(2)} requests`,
          'not per order',
        ]),
      ],
    ),
  );
  if (unspread.length === 0)
    log('  no partition outside the spread tables was touched by more than one order');

  // What to deploy for each peak.
  log(
    `\n== What to deploy: cheapest deployment keeping every resource under ${share * 100}% of its limit (${mix.kind}) ==`,
  );
  // One namespace is what the app supports; more is shown only where one cannot carry the peak.
  const plan = (t: number, namespaces: number[]) =>
    planFor(t, mix, limits, layout, prices, {
      share,
      averageShare,
      base: deployment,
      choices: {
        messagingUnits: [1, 2, 4, 8, 16],
        serviceBusNamespaces: namespaces,
        storageAccounts: [1, 2, 4, 8, 16, 32],
        indexPartitionsPerState: [1, 2, 4, 8, 16, 32],
        maxInstances: [100, 200, 500, 1000],
      },
    });
  const plans = targets.map((t) => plan(t, [1]) ?? plan(t, [2, 4, 8]));
  log(
    formatTable(
      ['peak orders/s', 'deploy', 'binds next', 'at orders/s', 'month', 'per million orders'],
      plans.map((p, i) =>
        p
          ? [
              fmt(targets[i]),
              describe(p.deployment),
              p.binding.resource.trim(),
              fmt(p.binding.ordersPerSecond),
              usd(p.cost.total),
              usd(p.cost.perMillionOrders),
            ]
          : [fmt(targets[i]), 'none of the choices carries it', '-', '-', '-', '-'],
      ),
    ),
  );
  log(
    `  month = the peak averaging ${averageShare * 100}% of itself for ${prices.hoursPerMonth} h; compute at the busy end (billed time = execution time)`,
  );

  const out = {
    date: from ? measured.date : started.toISOString(),
    pricedAt: started.toISOString(),
    mode: quick ? 'quick' : 'full',
    settings,
    limitsRead: limits.read,
    idle,
    shared,
    windows,
    loads,
    mix,
    deployment,
    ceilings: cs,
    binding: b,
    cost,
    plans: plans.map((p, i) => p ?? { target: targets[i], deployment: null }),
    partitionOperationsPerOrder: Object.fromEntries(
      mix.sharedPartitions.map((p) => [`${p.table}/${p.partition}`, partitionOperations(p)]),
    ),
  };
  const dir = join(root, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'capacity.json');
  writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  log(`\nJSON: ${file}  (total ${Math.round((Date.now() - started.getTime()) / 1000)} s)`);
}

void main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
