import { randomUUID } from 'node:crypto';
import { ServiceBusClient, type ServiceBusReceivedMessage } from '@azure/service-bus';
import { faultSku } from '../local/remoteServices/index.js';
import { queues } from '../shared/messaging/entities.js';
import {
  addHost,
  chaosSettings,
  crashHost,
  crashServiceBusKeepingData,
  proxyTables,
  readQueues,
  repoRoot,
  restartAzurite,
  restartServiceBusEmpty,
  runServiceBusWithPersistence,
  runServiceBusWithClockSkew,
  sleep,
  submitOrder,
  submitStalled,
  submitWithoutMessage,
  type ChaosContext,
} from './harness.js';
import { writeAppRootWithout } from './partialApp.js';
import { writeShortLockAppRoot } from './shortLockApp.js';
import { chaosWorkflows, versionsVariable, writeVersionedAppRoot } from './versionedApp.js';
import { actionIdempotencyKey, isTerminal, stepDefinition, workflowOf } from '../shared/domain/index.js';
import { serviceForOperation, type RemoteAction } from '../shared/agents/remoteOperations.js';
import { startThrottlingProxy, type ThrottlingProxy } from './throttlingProxy.js';
import { checkRetentionUnderLoad, runRetentionUnderLoad } from './retentionScenario.js';
import { waitingScenarios } from './waitingScenarios.js';

/**
 * The chaos scenarios. Each submits `n` orders and does its damage while they run; the runner
 * then drains (waits for every order to be terminal, bounded) and checks the invariants.
 */
export interface Scenario {
  name: string;
  /** Part of `--quick`. */
  quick: boolean;
  /**
   * Every fault it injects is one the system must ride out (crashes, restarts, backlogs, clocks,
   * transient errors): the run then fails unless no order ends in Error.
   */
  recoverable: boolean;
  /** Azurite and the emulator keep their data in a folder (needed to restart Azurite). */
  persistent?: boolean;
  settings?: Record<string, string>;
  /** Seconds of deliberate outage (or overload, by order count), added to the lost-order bound. */
  outageSeconds?: number | ((orders: number) => number);
  /** Builds the app root the stack runs (removed after the scenario); default this repo. */
  appRoot?: () => string;
  /** The stack's log lines reach `ctx.onLog` listeners. */
  captureLog?: boolean;
  what: string;
  /**
   * The fewest orders it can arrange its preconditions with; the runner refuses a smaller
   * `--orders` before anything starts, rather than run a scenario that cannot set itself up.
   */
  minOrders?: number;
  run(ctx: ChaosContext, n: number): Promise<string>;
  /**
   * After the drain: proof that the scenario's damage really happened, so it cannot pass
   * vacuously. Its violations count like the invariants'. `unmet` lists preconditions the
   * scenario failed to arrange: the run proved nothing there, which is not a product violation.
   */
  check?(ctx: ChaosContext): Promise<{ violations: string[]; note: string; unmet?: string[] }>;
}

/** What agent-past-lock sees in the host's log while it runs. */
interface LockWatch {
  /** paymentAgent invocations of a message delivered before (DeliveryCount >= 2). */
  redelivered: number;
  /** paymentAgent settlements refused by the broker because the lock had expired. */
  lockLost: number;
}
const lockWatches = new WeakMap<ChaosContext, LockWatch>();
/** servicebus-sigkill-kept: messages the restarted emulator read back from its log. */
const restoredCounts = new WeakMap<ChaosContext, number>();

/**
 * The remote call outlasts the lock: 8 s against a 5 s lock that is never renewed. Deliveries then
 * start about 0, 5, 10 and 15 s after dispatch; the step timeout of 16 s lets the second one
 * (done at ~13 s) still reply, so its reply meets the first one's (same message id), and the
 * fourth sees complete-by pass within its own lock and settles: four deliveries stay under the
 * agent queues' MaxDeliveryCount of 5.
 */
const pastLock = { lockSeconds: 5, callMs: 8000, stepTimeoutSeconds: 16, maxConcurrentCalls: 200 };

const slowAll = (ms: number): string[] => [
  faultSku('inventory', 'slow', ms),
  faultSku('payment', 'slow', ms),
  faultSku('shipping', 'slow', ms),
];

/** Submits n orders `gapMs` apart, SKUs chosen round-robin from `profiles`, all in parallel. */
async function submitMany(
  ctx: ChaosContext,
  n: number,
  profiles: string[][],
  gapMs: number,
  baseUrls?: string[],
): Promise<void> {
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    pending.push(submitOrder(ctx, profiles[i % profiles.length], baseUrls?.[i % baseUrls.length]));
    await sleep(gapMs);
  }
  await Promise.all(pending);
}

/**
 * With no faults every order must end Processed at its first try. Error with an alert is a legal
 * end, so the invariants alone let a stalled receiver pass (the Supervisor gives up on what it
 * strands); this check does not.
 */
async function everyOrderProcessedFirstTime(
  ctx: ChaosContext,
): Promise<{ violations: string[]; note: string }> {
  let notProcessed = 0;
  let retried = 0;
  for (const orderId of ctx.submitted.keys()) {
    const stored = await ctx.store.load(orderId);
    if (stored?.state.processState !== 'Processed') notProcessed += 1;
    if (stored && stored.state.failureCount > 0) retried += 1;
  }
  const violations: string[] = [];
  if (notProcessed > 0) violations.push(`${notProcessed} order(s) without faults did not end Processed`);
  if (retried > 0) violations.push(`${retried} order(s) without faults needed the Supervisor`);
  return { violations, note: `${ctx.submitted.size - notProcessed} Processed, ${retried} retried` };
}

/** scheduler-backlog: longer than the hard threshold's worth of claim timeouts, plus a margin. */
const backlog = {
  outageSeconds:
    Number(chaosSettings.FAILURE_HARD_THRESHOLD) * Number(chaosSettings.CLAIM_TIMEOUT_SECONDS) + 6,
};

/**
 * pause-reaches-rare-callers: the orders that trickle through the storm and how far apart, how
 * long after payment's first charge the storm starts (past the 5 s first lease), and its length
 * (its Retry-After too).
 */
const rareCallers = { orders: 12, gapMs: 1_000, settleMs: 6_000, stormSeconds: 5 };

/** soak: orders for a run of n per scenario (past the 2,048 deliveries a link once stalled at). */
const soakOrders = (n: number): number => Math.max(700, n);

/** burst: orders per scenario order. */
const burstFactor = 3;

/** Which steps needed more than one attempt, e.g. " (steps retried: inventory 3)"; "" when none. */
async function retriedSteps(ctx: ChaosContext): Promise<string> {
  const counts: Record<string, number> = {};
  for (const orderId of ctx.submitted.keys()) {
    for (const st of (await ctx.store.load(orderId))?.state.steps ?? [])
      if (st.attempt > 1) counts[st.name] = (counts[st.name] ?? 0) + 1;
  }
  const list = Object.entries(counts).map(([k, v]) => `${k} ${v}`);
  return list.length ? ` (steps retried: ${list.join(', ')})` : '';
}

/** Every order Processed, never counted a failure, and no operator alert raised for it. */
async function everyOrderProcessedUntouched(
  ctx: ChaosContext,
): Promise<{ violations: string[]; note: string }> {
  const { violations, note } = await everyOrderProcessedFirstTime(ctx);
  const retried = await retriedSteps(ctx);
  const { alerts } = await readQueues(ctx);
  const mine = alerts.filter((a) => a.orderId !== undefined && ctx.submitted.has(a.orderId));
  if (mine.length > 0) violations.push(`${mine.length} operator alert(s) for its orders`);
  return { violations, note: `${note}${retried}, ${mine.length} alerts` };
}

/**
 * For scenarios whose faults are all recoverable (503s, 429s, throttling, an outage that ends):
 * waiting is allowed, failing is not, so no order may end in Error.
 */
async function noOrderInError(ctx: ChaosContext): Promise<{ violations: string[]; note: string }> {
  let errors = 0;
  let retried = 0;
  for (const orderId of ctx.submitted.keys()) {
    const stored = await ctx.store.load(orderId);
    if (stored?.state.processState === 'Error') errors += 1;
    if (stored && stored.state.failureCount > 0) retried += 1;
  }
  return {
    violations: errors > 0 ? [`${errors} order(s) ended in Error although every fault was recoverable`] : [],
    note: `${errors} in Error, ${retried} spent failure budget`,
  };
}

/** deploy-mid-flight: which orders were submitted in which part, and what was in flight when. */
interface Deployments {
  onV1: string[];
  onV2: string[];
  /** Submitted on v1 in the third part, whose host then dropped v1 while they ran. */
  stranded: string[];
  /** Where the first part's v1 orders stood when the host was replaced. */
  spreadAtReplace: Record<string, number>;
  strandedInFlightAtRemoval: number;
}
const deployments = new WeakMap<ChaosContext, Deployments>();
/** Where v1 orders must be, at least one each, when the first replacement lands. */
const everySpot = ['Processing:inventory', 'Processing:payment', 'Processing:shipping', 'Compensating'];

/** Replaces the only host with one that holds `versions` (SIGTERM, then start): a deployment. */
async function deploy(ctx: ChaosContext, versions: string): Promise<void> {
  ctx.stack.env[versionsVariable] = versions;
  await ctx.stack.killHost('SIGTERM');
  await ctx.stack.startHost();
}

/** Where each order stands: its state, and the step it is at (do or undo). */
async function spread(ctx: ChaosContext, orderIds: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const loaded = await Promise.all(orderIds.map((id) => ctx.store.load(id).catch(() => undefined)));
  for (const stored of loaded) {
    const state = stored?.state;
    if (!state) continue;
    const at = state.steps.find((st) => ['Running', 'TimedOut', 'Compensating'].includes(st.status));
    const key = at ? `${state.processState}:${at.name}` : state.processState;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

/** Waits until every order named is terminal (bounded); returns how many still are not. */
async function untilTerminal(ctx: ChaosContext, orderIds: string[], timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let open = orderIds;
  while (Date.now() < deadline) {
    const states = await Promise.all(open.map((id) => ctx.store.load(id).catch(() => undefined)));
    open = open.filter((_, i) => {
      const st = states[i]?.state.processState;
      return st === undefined || !isTerminal(st);
    });
    if (open.length === 0) return 0;
    await sleep(500);
  }
  return open.length;
}

async function submitBatch(
  ctx: ChaosContext,
  n: number,
  profiles: string[][],
  gapMs: number,
): Promise<string[]> {
  const pending: Array<Promise<string | undefined>> = [];
  for (let i = 0; i < n; i++) {
    pending.push(submitOrder(ctx, profiles[i % profiles.length]));
    await sleep(gapMs);
  }
  return (await Promise.all(pending)).filter((id): id is string => id !== undefined);
}

/**
 * The effects an order left at the services, step by step in the order they happened: each of its
 * own version's steps once (Processed), or undone (Compensated); nothing of the other version.
 */
function effectsOfOwnVersion(ctx: ChaosContext, orderId: string, state: OrderStateLike): string[] {
  const problems: string[] = [];
  const workflow = workflowOf(chaosWorkflows, state);
  if (!workflow) return [`${orderId}: unknown workflow version ${state.workflowVersion}`];
  const ledgers = ctx.ledgers();
  const all = Object.values(ledgers).flatMap((l) => l.effects.filter((e) => e.orderId === orderId));
  const known = new Set(workflow.steps.map((def) => actionIdempotencyKey(orderId, def.name, 1)));
  const foreign = all.filter((e) => !known.has(e.idempotencyKey));
  if (foreign.length > 0)
    problems.push(
      `${orderId} (v${workflow.version}): effects of other steps ${foreign.map((e) => e.idempotencyKey).join(',')}`,
    );
  if (state.processState === 'Processed') {
    const performed = workflow.steps.map((def) => {
      const service = serviceForOperation(def.action as RemoteAction);
      const key = actionIdempotencyKey(orderId, def.name, 1);
      return {
        name: def.name,
        at: ledgers[service].effects.find((e) => e.idempotencyKey === key)?.performedAt,
      };
    });
    const missing = performed.filter((p) => p.at === undefined).map((p) => p.name);
    if (missing.length > 0)
      problems.push(`${orderId} (v${workflow.version}) Processed without ${missing.join(',')}`);
    const times = performed.map((p) => Date.parse(p.at ?? ''));
    if (times.some((t, i) => i > 0 && t < times[i - 1]))
      problems.push(`${orderId} (v${workflow.version}): steps not in its version's order`);
  }
  // Every step of the order's record is a step of its version, by name.
  for (const st of state.steps)
    if (!stepDefinition(workflow, st.name))
      problems.push(`${orderId}: step ${st.name} not in v${workflow.version}`);
  return problems;
}

type OrderStateLike = Parameters<typeof workflowOf>[1] & { processState: ProcessStateName };
type ProcessStateName = 'Pending' | 'Processing' | 'Processed' | 'Compensating' | 'Compensated' | 'Error';

/** credential-outage: the payment service answers 401 to everything for this long. */
const credentialOutageMs = 8000;

/** storage-throttling: the proxy in front of the host's tables, per run. */
const throttlingProxies = new WeakMap<ChaosContext, ThrottlingProxy>();

export const scenarios: Scenario[] = [
  {
    name: 'deploy-mid-flight',
    quick: false,
    // One v1 order per spot (4), v2 orders (4) and stranded ones (2): below that it cannot set up.
    minOrders: 10,
    // The third part strands orders on a removed version on purpose: those, and only those, end in Error.
    recoverable: false,
    // Calls of 2 s (10 s to complete): orders dwell at each step long enough to be caught there.
    settings: { [versionsVariable]: '1', STEP_TIMEOUT_SECONDS: '10' },
    appRoot: () => writeVersionedAppRoot(repoRoot),
    // Four host replacements, and v2 has a fourth step.
    outageSeconds: 30,
    what:
      'orders on order@1 sit at every step and in compensation when the host is replaced by one holding ' +
      'order@1 and order@2 (payment before inventory, a new deposit step); new orders start on v2; v1 is ' +
      'removed once drained. Then v1 orders are started again and v1 is removed while they run: those end ' +
      'in Error with an alert naming order@1',
    async run(ctx, n) {
      const d: Deployments = {
        onV1: [],
        onV2: [],
        stranded: [],
        spreadAtReplace: {},
        strandedInFlightAtRemoval: 0,
      };
      deployments.set(ctx, d);
      const profiles = [
        slowAll(2000),
        [
          faultSku('inventory', 'slow', 2000),
          faultSku('payment', 'slow', 2000),
          faultSku('shipping', 'permanent'),
        ],
        [faultSku('inventory', 'slow', 2000), faultSku('payment', 'permanent')],
        slowAll(1000),
      ];
      // At least one v1 order per spot (placed below), the rest of the first share mixed.
      const first = Math.max(everySpot.length, Math.round(n * 0.4));
      const second = Math.max(1, Math.round(n * 0.4));
      const third = n - first - second;
      // 1. v1 only; orders spread over every step and compensation when the host is replaced.
      // The mixed ones are staggered, so that the early ones are at later steps (or undoing).
      const mixed = first - everySpot.length;
      d.onV1 = await submitBatch(ctx, mixed, profiles, Math.min(400, Math.ceil(8000 / Math.max(1, mixed))));
      const covers = (spots: string[]) =>
        spots.every((spot) => Object.keys(d.spreadAtReplace).some((k) => k.startsWith(spot)));
      const watch = async (spots: string[], ms: number) => {
        const until = Date.now() + ms;
        d.spreadAtReplace = await spread(ctx, d.onV1);
        while (!covers(spots) && Date.now() < until) {
          await sleep(150);
          d.spreadAtReplace = await spread(ctx, d.onV1);
        }
      };
      // Then one order held at each spot, timed so that all four are there at once, whatever n:
      // a refused payment undoes an inventory reservation that takes `hold` ms, and the others
      // wait at inventory, payment and shipping for as long while the undo runs.
      const hold = 6000;
      d.onV1.push(
        ...(await submitBatch(
          ctx,
          1,
          [[faultSku('inventory', 'slow', hold), faultSku('payment', 'permanent')]],
          0,
        )),
      );
      await sleep(hold - 2000);
      for (const holder of [
        [faultSku('shipping', 'slow', hold)],
        [faultSku('payment', 'slow', hold)],
        [faultSku('inventory', 'slow', hold)],
      ]) {
        d.onV1.push(...(await submitBatch(ctx, 1, [holder], 0)));
        await sleep(400);
      }
      await watch(everySpot, hold);
      await deploy(ctx, '1,2');
      // 2. v1 and v2 side by side: new orders start on v2 while v1 orders finish on v1.
      // Paced: the new host starts cold while every v1 order is still running on it.
      d.onV2 = await submitBatch(ctx, second, profiles, Math.min(400, Math.ceil(16_000 / second)));
      const v1Open = await untilTerminal(ctx, d.onV1, 120_000);
      // v1 has drained: the next deployment removes it.
      await deploy(ctx, '2');
      const v2Open = await untilTerminal(ctx, d.onV2, 120_000);
      // 3. v1 again (a host that holds only v1), orders on it, and v1 removed while they run.
      await deploy(ctx, '1');
      d.stranded = await submitBatch(ctx, third, [slowAll(1500)], 50);
      await sleep(500);
      const before = await spread(ctx, d.stranded);
      d.strandedInFlightAtRemoval = Object.entries(before)
        .filter(([k]) => !['Processed', 'Compensated', 'Error'].includes(k))
        .reduce((sum, [, c]) => sum + c, 0);
      await deploy(ctx, '2');
      return (
        `${d.onV1.length} on v1 at ${JSON.stringify(d.spreadAtReplace)}, ${d.onV2.length} on v2` +
        `${v1Open + v2Open > 0 ? ` (${v1Open}/${v2Open} not drained in time)` : ''}; ` +
        `${d.stranded.length} stranded on v1 (${d.strandedInFlightAtRemoval} in flight at removal)`
      );
    },
    async check(ctx) {
      const d = deployments.get(ctx);
      if (!d) return { violations: ['deploy-mid-flight did not run'], note: '' };
      const violations: string[] = [];
      const unmet: string[] = [];
      const { alerts } = await readQueues(ctx);
      const alertsFor = (orderId: string) => alerts.filter((a) => a.orderId === orderId);
      const ends: Record<string, number> = {};
      for (const spot of everySpot)
        if (!Object.keys(d.spreadAtReplace).some((s) => s.startsWith(spot)))
          unmet.push(
            `no v1 order at ${spot} when the host was replaced (${JSON.stringify(d.spreadAtReplace)})`,
          );
      for (const [part, ids, version] of [
        ['v1', d.onV1, 1],
        ['v2', d.onV2, 2],
        ['stranded', d.stranded, 1],
      ] as const) {
        for (const orderId of ids) {
          const state = (await ctx.store.load(orderId))?.state;
          if (!state) {
            violations.push(`${orderId}: no state`);
            continue;
          }
          const key = `${part}:${state.processState}`;
          ends[key] = (ends[key] ?? 0) + 1;
          if (state.workflowVersion !== version)
            violations.push(`${orderId} (${part}) is on version ${state.workflowVersion}, not ${version}`);
          if (part === 'stranded' && state.processState === 'Error') {
            if (state.errorCode !== 'WorkflowRetired')
              violations.push(`${orderId}: Error ${state.errorCode}`);
            const mine = alertsFor(orderId);
            if (mine.length !== 1 || !JSON.stringify(mine[0].body).includes('order@1'))
              violations.push(`${orderId}: ${mine.length} alert(s), expected one naming order@1`);
            continue;
          }
          if (state.processState === 'Error')
            violations.push(`${orderId} (${part}) ended in Error: ${state.errorDetail}`);
          if (alertsFor(orderId).length > 0) violations.push(`${orderId} (${part}): an operator alert`);
          violations.push(...effectsOfOwnVersion(ctx, orderId, state));
        }
      }
      // Orders in flight on v1 when it was removed must end in Error; none in flight means the
      // scenario did not get to strand any (its setup, not the product).
      if ((ends['stranded:Error'] ?? 0) === 0) {
        if (d.strandedInFlightAtRemoval > 0)
          violations.push(
            `${d.strandedInFlightAtRemoval} stranded order(s) were in flight when v1 was removed, yet none ended in Error`,
          );
        else unmet.push('no stranded order was in flight when v1 was removed');
      }
      return { violations, unmet, note: `ends ${JSON.stringify(ends)}` };
    },
  },
  {
    name: 'baseline',
    quick: false,
    recoverable: true,
    what: 'no faults: the yardstick for the others; every order must end Processed at its first try',
    async run(ctx, n) {
      await submitMany(ctx, n, [[]], 50);
      return 'no faults';
    },
    check: everyOrderProcessedFirstTime,
  },
  {
    name: 'soak',
    quick: false,
    recoverable: true,
    what:
      'no faults, at least 700 orders through one host (about 2,800 deliveries on the scheduler ' +
      'queue, past the 2,048 at which a receive link once stalled); every order must end Processed ' +
      'at its first try',
    async run(ctx, n) {
      // The baseline's pace (20 orders/s): the soak tests long-lived links, not overload (faster,
      // steps queue past the 3 s step timeout and get retried). 700 orders are enough for that; at
      // 1,400 (7 x a full run's 200) this 2-core machine no longer holds 20 orders/s to the end
      // and the soak measured its throughput instead (docs/reliability.md, session 6).
      const orders = soakOrders(n);
      await submitMany(ctx, orders, [[]], 50);
      return `no faults, ${orders} orders`;
    },
    check: everyOrderProcessedFirstTime,
  },
  {
    name: 'host-sigkill-at-steps',
    quick: true,
    recoverable: true,
    what:
      'SIGKILL of the only host while orders sit at every step boundary: each remote call is slowed ' +
      '(slow:700) so orders dwell in claim, agent call, reply and compensation; kills land at staggered times',
    async run(ctx, n) {
      const profiles = [
        slowAll(700),
        [...slowAll(700), faultSku('payment', 'lost-reply')],
        [
          faultSku('inventory', 'slow', 700),
          faultSku('payment', 'slow', 700),
          faultSku('shipping', 'permanent'),
        ],
        [...slowAll(1500)],
      ];
      const submitting = submitMany(ctx, n, profiles, 150);
      let kills = 0;
      for (const at of [900, 1800, 2400]) {
        await sleep(at);
        await crashHost(ctx, 200);
        kills += 1;
      }
      await submitting;
      await sleep(1500);
      await crashHost(ctx, 200); // during compensations and late steps
      kills += 1;
      return `${kills} SIGKILLs`;
    },
  },
  {
    name: 'crash-after-submit-write',
    quick: true,
    recoverable: true,
    what:
      'a submission that died after its table transaction and before its process-order message: orders ' +
      'written through the store with no message; only the Supervisor can find them',
    async run(ctx, n) {
      for (let i = 0; i < n; i++) {
        if (i % 3 === 2) await submitOrder(ctx, []);
        else await submitWithoutMessage(ctx, []);
      }
      return `${[...ctx.submitted.values()].filter((s) => s.viaStore).length} written without a message`;
    },
  },
  {
    name: 'duplicate-delivery',
    quick: true,
    recoverable: true,
    what:
      'every message type delivered twice: process-order, agent requests and agent replies are copied ' +
      '(new MessageId, same body) as they appear, and copied again 5 s later (after the original was ' +
      'settled, like a redelivery after lock expiry); plus poison messages naming real orders',
    async run(ctx, n) {
      const client = new ServiceBusClient(ctx.serviceBus.connectionString);
      const copied = { 'process-order': 0, 'agent-request': 0, 'agent-reply': 0, poison: 0 };
      const seen = new Set<string>();
      let stop = false;
      const resend = async (
        entity: string,
        m: ServiceBusReceivedMessage,
        suffix: string,
        delayMs: number,
      ) => {
        const sender = client.createSender(entity);
        try {
          await sender.sendMessages({
            messageId: `${String(m.messageId)}:${suffix}`,
            body: m.body,
            subject: m.subject,
            correlationId: m.correlationId,
            contentType: m.contentType,
            ...(delayMs > 0 ? { scheduledEnqueueTimeUtc: new Date(Date.now() + delayMs) } : {}),
          });
        } finally {
          await sender.close();
        }
      };
      const watched = [queues.scheduler, queues.inventoryAgent, queues.paymentAgent, queues.shippingAgent];
      const duplicator = (async () => {
        const receivers = watched.map((q) => ({ q, r: client.createReceiver(q) }));
        while (!stop) {
          for (const { q, r } of receivers) {
            const batch = await r.peekMessages(100).catch(() => []);
            for (const m of batch) {
              const id = String(m.messageId);
              if (seen.has(id) || id.includes(':dup') || id.includes(':late')) continue;
              seen.add(id);
              const type = (m.body as { type?: keyof typeof copied })?.type;
              if (type && type in copied) copied[type] += 1;
              await resend(q, m, 'dup', 0).catch(() => undefined);
              await resend(q, m, 'late', 5000).catch(() => undefined);
            }
          }
          await sleep(50);
        }
        await Promise.all(receivers.map(({ r }) => r.close()));
      })();
      const profiles = [slowAll(400), [faultSku('payment', 'slow', 400), faultSku('shipping', 'permanent')]];
      await submitMany(ctx, n, profiles, 100);
      // The process-order message is settled too fast to peek reliably: send its copies by hand,
      // with the body the API sends.
      const scheduler = client.createSender(queues.scheduler);
      for (const orderId of ctx.submitted.keys()) {
        const body = { type: 'process-order', orderId, reason: 'submitted' };
        await scheduler.sendMessages([
          { messageId: `${orderId}:process:submitted:1:dup`, body, contentType: 'application/json' },
          {
            messageId: `${orderId}:process:submitted:1:late`,
            body,
            contentType: 'application/json',
            scheduledEnqueueTimeUtc: new Date(Date.now() + 5000),
          },
        ]);
        copied['process-order'] += 1;
      }
      // Poison: a reply with an impossible attempt, naming two real orders.
      for (const orderId of [...ctx.submitted.keys()].slice(0, 2)) {
        await scheduler.sendMessages({
          messageId: `poison-${randomUUID()}`,
          body: {
            type: 'agent-reply',
            orderId,
            run: 1,
            step: 'payment',
            kind: 'do',
            attempt: 0,
            outcome: 'succeeded',
          },
          contentType: 'application/json',
        });
        copied.poison += 1;
      }
      await scheduler.close();
      await sleep(8000);
      stop = true;
      await duplicator;
      await client.close();
      return `copied: ${Object.entries(copied)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`;
    },
  },
  {
    name: 'competing-hosts',
    quick: true,
    recoverable: true,
    what:
      'three hosts on the same Azurite and emulator: competing Schedulers, Agents and Supervisors (every ' +
      'host runs the timer); one of them SIGKILLed mid-run',
    async run(ctx, n) {
      const a = await addHost(ctx);
      const b = await addHost(ctx);
      const urls = [ctx.stack.baseUrl, a.baseUrl, b.baseUrl];
      const profiles = [slowAll(300), [faultSku('payment', 'hang')], [faultSku('shipping', 'permanent')], []];
      const submitting = submitMany(ctx, n, profiles, 100, urls.slice(0, 2));
      await sleep(1500);
      await b.kill('SIGKILL');
      await submitting;
      return '3 hosts, 1 SIGKILLed';
    },
  },
  {
    name: 'azurite-restart',
    quick: false,
    recoverable: true,
    persistent: true,
    outageSeconds: 5,
    what: 'Azurite (tables) stopped for ~3 s mid-flight and started again on its data folder',
    async run(ctx, n) {
      const submitting = submitMany(ctx, n, [slowAll(300), []], 100);
      await sleep(1200);
      await restartAzurite(ctx, 3000);
      await submitting;
      return 'Azurite down ~3 s';
    },
  },
  {
    name: 'servicebus-restart-empty',
    quick: true,
    recoverable: true,
    outageSeconds: 10,
    what:
      'the Service Bus emulator restarted mid-flight WITHOUT persistence: every queued message is lost, ' +
      'the Supervisor must recover every order from the tables alone',
    async run(ctx, n) {
      await submitMany(ctx, n, [slowAll(500), []], 80);
      await sleep(800);
      await restartServiceBusEmpty(ctx, 1500);
      // The worker is recycled here, as a platform would restart it; servicebus-restart-host-kept
      // covers the host re-creating its receivers by itself.
      await ctx.stack.killHost('SIGTERM');
      await ctx.stack.startHost();
      return 'emulator lost all messages; host recycled';
    },
  },
  {
    name: 'servicebus-restart-host-kept',
    quick: false,
    recoverable: false,
    outageSeconds: 10,
    what:
      'as above but the host is NOT recycled: shows what the invariants still guarantee while the ' +
      "local host's triggers stay disconnected (orders end in Error with an alert, nothing is lost)",
    async run(ctx, n) {
      await submitMany(ctx, n, [slowAll(500), []], 80);
      await sleep(800);
      await restartServiceBusEmpty(ctx, 1500);
      return 'emulator lost all messages; host kept';
    },
  },
  {
    name: 'servicebus-sigkill-kept',
    quick: true,
    recoverable: true,
    persistent: true,
    outageSeconds: 10,
    // Longer than the host takes to notice the broker is back (its watchdog looks every 5 s), so
    // an order whose messages came back finishes without the Supervisor.
    settings: { STEP_TIMEOUT_SECONDS: '30' },
    what:
      'the Service Bus emulator WITH persistence (--data), as its own process, SIGKILLed mid-flight and ' +
      'started again on its folder (step timeout 30 s): the acknowledged messages come back and carry ' +
      'the orders on without the Supervisor; the host reconnects by itself',
    async run(ctx, n) {
      const dataDir = await runServiceBusWithPersistence(ctx);
      // The swap itself cut the host's links before any order existed; a fresh host starts clean
      // on the persisted emulator, so only the SIGKILL below is under test.
      await ctx.stack.killHost('SIGTERM');
      await ctx.stack.startHost();
      await submitMany(ctx, n, [slowAll(500), []], 80);
      await sleep(800);
      const restored = await crashServiceBusKeepingData(ctx, dataDir, 1500);
      restoredCounts.set(ctx, restored);
      return `emulator SIGKILLed, ${restored} messages restored from its log; host kept`;
    },
    async check(ctx) {
      const restored = restoredCounts.get(ctx) ?? 0;
      let retried = 0;
      for (const orderId of ctx.submitted.keys()) {
        const stored = await ctx.store.load(orderId);
        if (stored && stored.state.failureCount > 0) retried += 1;
      }
      const violations: string[] = [];
      if (restored === 0) violations.push('sigkill-kept: the restarted emulator restored no message');
      // The outage (1.5 s plus the host's reconnect) is far inside the 30 s step timeout: a kept
      // message carries every order on, so none should need the Supervisor.
      if (retried > 0)
        violations.push(
          `sigkill-kept: ${retried} order(s) needed the Supervisor (their messages did not carry them on)`,
        );
      return {
        violations,
        note: `${restored} messages restored; ${retried} of ${ctx.submitted.size} orders needed the Supervisor`,
      };
    },
  },
  {
    name: 'transient-30pct',
    quick: true,
    recoverable: true,
    what: 'every remote service answers 30 % of requests with 503 (seeded)',
    async run(ctx, n) {
      for (const s of ['inventory', 'payment', 'shipping'] as const)
        ctx.stack.remote[s].setFaults({ transientRate: 0.3, seed: 7 });
      await submitMany(ctx, n, [[]], 60);
      return 'transientRate 0.3';
    },
    check: noOrderInError,
  },
  {
    name: 'transient-50pct',
    quick: false,
    recoverable: true,
    what: 'every remote service answers 50 % of requests with 503 (seeded)',
    async run(ctx, n) {
      for (const s of ['inventory', 'payment', 'shipping'] as const)
        ctx.stack.remote[s].setFaults({ transientRate: 0.5, seed: 11 });
      await submitMany(ctx, n, [[]], 60);
      return 'transientRate 0.5';
    },
    check: noOrderInError,
  },
  {
    name: 'remote-faults-mix',
    quick: true,
    recoverable: false,
    what:
      'permanent errors (compensation), a failing compensation (Error + alert), an agent hanging past ' +
      'complete-by, latency close to the deadline (2.6 s of 3 s), throttling and transient compensations',
    async run(ctx, n) {
      const profiles = [
        [faultSku('shipping', 'permanent')],
        [faultSku('shipping', 'permanent'), faultSku('payment', 'compensation-fails')],
        [faultSku('payment', 'hang')],
        [faultSku('payment', 'slow', 2600)],
        [faultSku('inventory', 'throttle')],
        [faultSku('shipping', 'permanent'), faultSku('inventory', 'compensation-transient')],
        [faultSku('payment', 'permanent')],
      ];
      await submitMany(ctx, n, profiles, 60);
      return `${profiles.length} fault profiles`;
    },
    async check(ctx) {
      // Throttling (429) is recoverable: those orders must end Processed.
      const throttle = faultSku('inventory', 'throttle');
      let throttled = 0;
      let notProcessed = 0;
      for (const [orderId, s] of ctx.submitted) {
        if (s.skus.length !== 1 || s.skus[0] !== throttle) continue;
        throttled += 1;
        if ((await ctx.store.load(orderId))?.state.processState !== 'Processed') notProcessed += 1;
      }
      return {
        violations:
          notProcessed > 0 ? [`${notProcessed} throttled (429) order(s) did not end Processed`] : [],
        note: `${throttled - notProcessed}/${throttled} throttled orders Processed`,
      };
    },
  },
  {
    name: 'credential-outage',
    quick: true,
    recoverable: true,
    outageSeconds: credentialOutageMs / 1000,
    // Low enough that a quick run's dozen orders open the outage too.
    settings: { SERVICE_OUTAGE_ALERT_THRESHOLD: '3' },
    what:
      `the payment service answers 401 to every call for ${credentialOutageMs / 1000} s (longer than a ` +
      'step timeout), as after a revoked key, then recovers: every order Processed, none compensated, ' +
      'exactly one operator alert for the outage and none for an order',
    async run(ctx, n) {
      // The key is revoked before the orders come; the outage lasts from the first refused call, so
      // it is longer than a step timeout however slow the machine is.
      ctx.stack.remote.payment.setFaults({ answerStatus: 401 });
      // Half the baseline's pace: the scenario is about the outage, not overload (burst).
      const submitting = submitMany(ctx, n, [[]], 100);
      const refused = () => ctx.ledgers().payment.counts.faultsInjected['status-401'] ?? 0;
      for (let waited = 0; refused() === 0 && waited < 60_000; waited += 200) await sleep(200);
      await sleep(credentialOutageMs);
      ctx.stack.remote.payment.setFaults({});
      await submitting;
      return `payment 401 for ${credentialOutageMs / 1000} s`;
    },
    async check(ctx) {
      const violations: string[] = [];
      const byState: Record<string, number> = {};
      for (const orderId of ctx.submitted.keys()) {
        const state = (await ctx.store.load(orderId))?.state.processState ?? 'missing';
        byState[state] = (byState[state] ?? 0) + 1;
      }
      const processed = byState.Processed ?? 0;
      if (processed !== ctx.submitted.size)
        violations.push(
          `${ctx.submitted.size - processed} order(s) not Processed (${JSON.stringify(byState)})`,
        );
      const ledgers = ctx.ledgers();
      const undone = Object.values(ledgers).reduce(
        (n, l) => n + l.counts.compensations + l.counts.tombstones,
        0,
      );
      if (undone > 0) violations.push(`${undone} compensation(s) reached the services`);
      const refused = ledgers.payment.counts.faultsInjected['status-401'] ?? 0;
      if (refused === 0) violations.push('the payment service answered no 401');
      const { alerts } = await readQueues(ctx);
      const outage = alerts.filter((a) => a.orderId === 'service:payment');
      const orderAlerts = alerts.filter((a) => !a.orderId?.startsWith('service:'));
      if (outage.length !== 1)
        violations.push(`${outage.length} outage alert(s) for payment, expected exactly 1`);
      if (orderAlerts.length > 0) violations.push(`${orderAlerts.length} order alert(s)`);
      const status = (outage[0]?.body as { status?: number } | undefined)?.status;
      if (outage.length === 1 && status !== 401)
        violations.push(`the outage alert names status ${status}, not 401`);
      return {
        violations,
        note: `${refused} calls answered 401; ${outage.length} outage alert(s); ${undone} compensations`,
      };
    },
  },
  {
    name: 'pause-reaches-rare-callers',
    quick: true,
    recoverable: true,
    outageSeconds: rareCallers.stormSeconds,
    what:
      `three hosts; ${rareCallers.orders} orders trickle in ${rareCallers.gapMs} ms apart (each host calls payment ` +
      'about once in 3 s, so no limit binds and leases grow long), and the rest come after; payment ' +
      `answers 429 with Retry-After ${rareCallers.stormSeconds} s for as long, from ${rareCallers.settleMs / 1000} s ` +
      'after its first charge: no payment call may reach it from 1 s after the first 429 until the ' +
      'Retry-After (issue 26), and every order ends Processed',
    async run(ctx, n) {
      const hosts = [ctx.stack.baseUrl, (await addHost(ctx)).baseUrl, (await addHost(ctx)).baseUrl];
      const rare = Math.min(n, rareCallers.orders);
      const trickling = submitMany(ctx, rare, [[]], rareCallers.gapMs, hosts);
      // The storm starts once every host has renewed past its first lease at this pace (a host
      // that calls steadily but seldom then holds a long one) and payment has answered calls.
      const charged = () => ctx.ledgers().payment.requests.some((r) => r.status === 200);
      for (let waited = 0; !charged() && waited < 60_000; waited += 100) await sleep(100);
      await sleep(rareCallers.settleMs);
      ctx.stack.remote.payment.setFaults({ answerStatus: 429, retryAfterSeconds: rareCallers.stormSeconds });
      await sleep(rareCallers.stormSeconds * 1000);
      ctx.stack.remote.payment.setFaults({});
      await trickling;
      if (n > rare) await submitMany(ctx, n - rare, [[]], 50, hosts);
      return `3 hosts, ${rare} orders ${rareCallers.gapMs} ms apart, payment 429 for ${rareCallers.stormSeconds} s`;
    },
    async check(ctx) {
      const requests = ctx.ledgers().payment.requests.map((r) => ({ ...r, at: Date.parse(r.receivedAt) }));
      const refused = requests.filter((r) => r.status === 429);
      // A 429 with Retry-After is waited out: every order ends Processed, none compensated.
      const violations: string[] = [];
      let notProcessed = 0;
      for (const orderId of ctx.submitted.keys())
        if ((await ctx.store.load(orderId))?.state.processState !== 'Processed') notProcessed += 1;
      if (notProcessed > 0) violations.push(`${notProcessed} order(s) did not end Processed`);
      if (refused.length === 0)
        return { violations, note: 'no 429 answered', unmet: ['the storm refused no call'] };
      const first = Math.min(...refused.map((r) => r.at));
      const inPause = requests.filter(
        (r) => r.at > first + 1000 && r.at < first + rareCallers.stormSeconds * 1000,
      );
      if (inPause.length > 0)
        violations.push(
          `${inPause.length} payment call(s) in the pause, at +${inPause.map((r) => r.at - first).join(', +')} ms after the first 429`,
        );
      const after = requests.filter(
        (r) => r.at >= first + rareCallers.stormSeconds * 1000 && r.status === 200,
      ).length;
      return {
        violations,
        note: `${refused.length} refused, ${inPause.length} in the pause, ${after} charged after it; ${ctx.submitted.size - notProcessed} Processed`,
      };
    },
  },
  {
    name: 'storage-throttling',
    quick: false,
    recoverable: true,
    what:
      "an HTTP proxy in front of the host's table endpoint answers 20 % of table requests at once with " +
      '503 ServerBusy (a quarter of those 500 OperationTimedOut), seeded: every order Processed',
    async run(ctx, n) {
      const table = new URL(ctx.azurite.tableUrl);
      const proxy = await startThrottlingProxy(
        { host: table.hostname, port: Number(table.port) },
        { rate: 0.2, seed: 13 },
      );
      throttlingProxies.set(ctx, proxy);
      ctx.stack.env.StateStoreConnection = ctx.azurite.connectionString.replace(
        /TableEndpoint=http:\/\/[^/;]+/,
        `TableEndpoint=http://127.0.0.1:${proxy.port}`,
      );
      await ctx.stack.killHost('SIGTERM');
      await ctx.stack.startHost();
      // Half the baseline's pace: this scenario is about throttled requests, not overload (burst).
      await submitMany(ctx, n, [[], slowAll(200)], 100);
      return 'tables throttled 20 %';
    },
    async check(ctx) {
      const proxy = throttlingProxies.get(ctx);
      const violations: string[] = [];
      let notProcessed = 0;
      let retried = 0;
      // Where the spent budget went: a step that needed another attempt, or only a late claim.
      const redone: Record<string, number> = { claim: 0 };
      for (const orderId of ctx.submitted.keys()) {
        const stored = await ctx.store.load(orderId);
        if (stored?.state.processState !== 'Processed') notProcessed += 1;
        if (stored && stored.state.failureCount > 0) {
          retried += 1;
          const steps = stored.state.steps.filter((st) => st.attempt > 1).map((st) => st.name);
          for (const name of steps.length > 0 ? steps : ['claim']) redone[name] = (redone[name] ?? 0) + 1;
        }
      }
      if (notProcessed > 0) violations.push(`${notProcessed} order(s) not Processed`);
      const throttled = proxy?.throttled() ?? 0;
      const forwarded = proxy?.forwarded() ?? 0;
      if (throttled === 0) violations.push('the proxy throttled no request');
      await proxy?.close();
      return {
        violations,
        note:
          `${throttled} of ${throttled + forwarded} table requests throttled; ${retried} order(s) spent ` +
          `failure budget (${JSON.stringify(redone)})`,
      };
    },
  },
  {
    name: 'clock-skew',
    quick: false,
    recoverable: true,
    what:
      'a second host whose wall clock runs 2.5 s ahead (Date shifted by a preload, NODE_OPTIONS; the app ' +
      'has no clock hook) and a third with STEP_TIMEOUT_SECONDS 6 instead of 3',
    async run(ctx, n) {
      const skewed = await addHost(ctx, {
        NODE_OPTIONS: `--require ${require.resolve('./clockSkew.js')}`,
        CHAOS_CLOCK_SKEW_MS: '2500',
      });
      const longer = await addHost(ctx, { STEP_TIMEOUT_SECONDS: '6' });
      await submitMany(ctx, n, [slowAll(800), [faultSku('payment', 'slow', 2600)], []], 80, [
        ctx.stack.baseUrl,
        skewed.baseUrl,
        longer.baseUrl,
      ]);
      return 'skew +2.5 s; timeouts 3 s vs 6 s';
    },
  },
  {
    name: 'table-write-lost-reply',
    quick: true,
    recoverable: true,
    what:
      'a TCP proxy in front of Azurite forwards every 4th entity-group transaction ($batch) and drops ' +
      "the answer: the write commits, the host's client sees a reset and retries or re-reads",
    async run(ctx, n) {
      const proxy = await proxyTables(ctx);
      proxy.setRule({ match: /^POST \S*\$batch/, every: 4 });
      await submitMany(ctx, n, [[], slowAll(200), [faultSku('shipping', 'permanent')]], 100);
      await sleep(4000);
      proxy.setRule(undefined);
      return `dropped ${proxy.dropped()} of ${proxy.matched()} transaction answers`;
    },
  },
  {
    name: 'agent-past-lock',
    quick: true,
    recoverable: true,
    settings: { STEP_TIMEOUT_SECONDS: String(pastLock.stepTimeoutSeconds) },
    appRoot: () =>
      writeShortLockAppRoot({
        repoRoot,
        lockDuration: `PT${pastLock.lockSeconds}S`,
        maxAutoLockRenewalDuration: '00:00:00',
        maxConcurrentCalls: pastLock.maxConcurrentCalls,
      }),
    captureLog: true,
    what:
      'an Agent still waiting on the remote service when its message lock expires (agent queues PT5S, ' +
      'lock renewal off, payment slow:8000, step timeout 16 s): the broker redelivers to a second ' +
      'invocation that calls again with the same Idempotency-Key, the first settlement fails with the ' +
      'lock lost, the second reply carries the same message id',
    async run(ctx, n) {
      const watch: LockWatch = { redelivered: 0, lockLost: 0 };
      lockWatches.set(ctx, watch);
      ctx.onLog((line) => {
        if (!line.includes('paymentAgent')) return;
        const delivery = /Executing 'Functions\.paymentAgent' \(Reason='.*DeliveryCount=(\d+)/.exec(line);
        if (delivery && Number(delivery[1]) >= 2) watch.redelivered += 1;
        if (/Could not complete message .*lock/i.test(line)) watch.lockLost += 1;
      });
      const slowPayment = faultSku('payment', 'slow', pastLock.callMs);
      // A third also fail at shipping: the refund is as slow, so the compensation outlives its
      // lock too. A third run without faults through the same short-lock queues.
      await submitMany(ctx, n, [[slowPayment], [slowPayment, faultSku('shipping', 'permanent')], []], 250);
      return `lock ${pastLock.lockSeconds} s not renewed, payment ${pastLock.callMs / 1000} s, step timeout ${pastLock.stepTimeoutSeconds} s`;
    },
    async check(ctx) {
      const watch = lockWatches.get(ctx)!;
      const counts = () => {
        const payment = ctx.ledgers().payment.counts;
        const entity = ctx.serviceBus.counters().entities.find((e) => e.path === queues.paymentAgent);
        const scheduler = ctx.serviceBus.counters().senders.find((s) => s.path === queues.scheduler);
        return {
          chargesAbsorbed: payment.duplicatesAbsorbed,
          refunds: payment.compensations,
          refundsAbsorbed: payment.compensationDuplicatesAbsorbed,
          lockExpired: entity?.lockExpired ?? 0,
          schedulerDuplicates: scheduler?.duplicates ?? 0,
        };
      };
      // The second invocation's call ends a whole slow call after the first: wait for it, bounded.
      const deadline = Date.now() + 30_000;
      let c = counts();
      while (
        (c.chargesAbsorbed === 0 ||
          c.lockExpired === 0 ||
          watch.redelivered === 0 ||
          watch.lockLost === 0 ||
          c.schedulerDuplicates === 0 ||
          (c.refunds > 0 && c.refundsAbsorbed === 0)) &&
        Date.now() < deadline
      ) {
        await sleep(500);
        c = counts();
      }
      const violations: string[] = [];
      if (c.lockExpired === 0) violations.push('past-lock: no lock on agent-payment expired');
      if (watch.redelivered === 0)
        violations.push('past-lock: no paymentAgent invocation with DeliveryCount >= 2 (no redelivery)');
      if (c.chargesAbsorbed === 0)
        violations.push(
          'past-lock: the payment ledger absorbed no duplicate charge (the redelivery never called)',
        );
      if (watch.lockLost === 0)
        violations.push('past-lock: no paymentAgent settlement failed with the lock lost');
      if (c.refunds > 0 && c.refundsAbsorbed === 0)
        violations.push('past-lock: refunds were made but no redelivered refund reached the ledger');
      if (c.schedulerDuplicates === 0)
        violations.push('past-lock: no second reply for the same attempt reached the scheduler queue');
      return {
        violations,
        note:
          `locks expired ${c.lockExpired}, redeliveries ${watch.redelivered}, lock-lost settlements ` +
          `${watch.lockLost}, duplicates absorbed: charge ${c.chargesAbsorbed} refund ${c.refundsAbsorbed}, ` +
          `scheduler duplicates dropped ${c.schedulerDuplicates}`,
      };
    },
  },
  {
    name: 'scheduler-backlog',
    quick: false,
    recoverable: true,
    outageSeconds: backlog.outageSeconds,
    appRoot: () => writeAppRootWithout(repoRoot, ['scheduler']),
    what:
      'no Scheduler consumes for longer than hard threshold x claim timeout (the stack runs every ' +
      'function but the Scheduler), then a full host comes: every order must end Processed with ' +
      'FailureCount 0 and no alert',
    async run(ctx, n) {
      const started = Date.now();
      await submitMany(ctx, n, [[]], 10);
      await sleep(Math.max(0, backlog.outageSeconds * 1000 - (Date.now() - started)));
      await addHost(ctx, {}, repoRoot);
      return `no Scheduler for ${backlog.outageSeconds} s (hard ${chaosSettings.FAILURE_HARD_THRESHOLD} x claim timeout ${chaosSettings.CLAIM_TIMEOUT_SECONDS} s)`;
    },
    check: (ctx) => everyOrderProcessedUntouched(ctx),
  },
  {
    name: 'burst',
    quick: false,
    recoverable: true,
    // Deliberate overload: the drain may take as long as working through the burst does, at the
    // ~5 orders/s a loaded 2-core machine sustains end to end.
    outageSeconds: (n) => Math.ceil((burstFactor * n) / 5),
    // The product's default door (hard threshold x claim timeout): a client refused at it waits
    // Retry-After and tries again; only acknowledged orders are owed a terminal state.
    settings: {
      ADMISSION_BACKLOG_LIMIT_SECONDS: String(
        Number(chaosSettings.FAILURE_HARD_THRESHOLD) * Number(chaosSettings.CLAIM_TIMEOUT_SECONDS),
      ),
    },
    what:
      `${burstFactor} x the orders, all POSTed at once, remote services instant: many times what the ` +
      'Scheduler and Agents drain in one step timeout; every acknowledged order must end Processed',
    async run(ctx, n) {
      await Promise.all(Array.from({ length: burstFactor * n }, () => submitOrder(ctx, [])));
      return `${burstFactor * n} orders at once`;
    },
    async check(ctx) {
      let notProcessed = 0;
      let retried = 0;
      for (const orderId of ctx.submitted.keys()) {
        const stored = await ctx.store.load(orderId);
        if (stored?.state.processState !== 'Processed') notProcessed += 1;
        if (stored && stored.state.failureCount > 0) retried += 1;
      }
      return {
        violations:
          notProcessed > 0 ? [`burst: ${notProcessed} acknowledged order(s) did not end Processed`] : [],
        note: `${ctx.submitted.size - notProcessed} Processed, ${retried} with FailureCount > 0${await retriedSteps(ctx)}`,
      };
    },
  },
  {
    name: 'broker-clock-ahead',
    quick: false,
    recoverable: true,
    settings: { EXTENDED_BACKOFF_SECONDS: '8' },
    what:
      "the Service Bus emulator's wall clock 5 s ahead of every host (its own process with the " +
      'clockSkew.js preload): scheduled retries arrive "early" by the hosts\' clocks; half the orders ' +
      'hang at payment three times (so they pass the soft threshold and wait an 8 s back-off), ' +
      'none may end in Error',
    async run(ctx, n) {
      await runServiceBusWithClockSkew(ctx, 5000);
      await submitMany(ctx, n, [[faultSku('payment', 'hang', 3)], []], 50);
      return 'broker clock +5 s; payment hangs 3 times for half the orders; back-off 8 s';
    },
  },
  {
    name: 'retention-under-load',
    quick: false,
    recoverable: true,
    // Orders that finished 3 days ago are past a 1-day retention; the purge runs 100 orders/s.
    settings: { ORDER_RETENTION_DAYS: '1', ORDER_PURGE_RATE_PER_SECOND: '100' },
    what:
      'live orders while 10x as many orders that finished days ago are archived and purged by the ' +
      "host's Supervisor (some held), the host SIGKILLed mid-purge, their requests resubmitted",
    run: runRetentionUnderLoad,
    check: checkRetentionUnderLoad,
  },
  {
    name: 'submission-stall',
    quick: true,
    recoverable: true,
    what:
      'submissions that stall 6 s between the in-flight index put and the order transaction (sweeps ' +
      'run in between, the claim timeout of 3 s has passed) and then die before their process-order ' +
      'message: only the Supervisor, through the index, can find them; plus ordinary orders',
    async run(ctx, n) {
      const stalled: Promise<unknown>[] = [];
      for (let i = 0; i < n; i++) {
        if (i % 2 === 0) stalled.push(submitStalled(ctx, [], 6000));
        else await submitOrder(ctx, []);
        await sleep(20);
      }
      await Promise.all(stalled);
      return `${Math.ceil(n / 2)} submissions stalled 6 s between their writes, then no message`;
    },
  },
  // Issue 25: steps that wait for callbacks (waitingScenarios.ts).
  ...waitingScenarios,
];
