import { randomBytes } from 'node:crypto';
import type { FaultSettings } from '../local/remoteServices/index.js';
import type { WebhookRecord } from '../local/remoteServices/webhooks.js';
import { mintToken, type SigningKey } from '../shared/callbacks/token.js';
import { parseSigningKeys } from '../shared/config/waitingSettings.js';
import { crashHost, repoRoot, sleep, submitOrder, type ChaosContext } from './harness.js';
import type { Scenario } from './scenarios.js';
import { shortWaits, writeShortWaitAppRoot } from './waitingApp.js';

/**
 * Issue 25's chaos scenarios: orders on order@2 (payment confirmed by webhook) with short waits
 * (waitingApp.ts: the payment waits 4 s for its callback), the demo payment service's webhook mode
 * doing the damage. Every order is small (its approval is waived), so each must end Processed; the
 * invariants then add "a waiting step's outcome comes only from a valid callback, an operator or a
 * timeout" (waitingOutcomes.ts) read from every order's history.
 */
/** What every scenario here shares: order@2 with short waits, a full run only, recoverable. */
const onOrder2 = {
  quick: false,
  recoverable: true,
  settings: { NEW_ORDER_WORKFLOW_VERSION: '2' },
  appRoot: () => writeShortWaitAppRoot(repoRoot),
} satisfies Partial<Scenario>;

/** A callback step's timeouts, each the step timeout (3 s to the 202), the wait and a sweep. */
const waitOutage = (timeouts: number): number =>
  timeouts * (3 + shortWaits.payment.completeBySeconds + 1) + 10;

interface Claims {
  o: string;
  s: string;
  r: number;
  a: number;
  e: number;
}

function tokenOf(url: string): string {
  return url.split('/callbacks/')[1]?.split('/')[0] ?? '';
}

function claimsOf(url: string): Claims | undefined {
  try {
    return JSON.parse(Buffer.from(tokenOf(url).split('.')[2] ?? '', 'base64url').toString()) as Claims;
  } catch {
    return undefined;
  }
}

/** The payment service's callbacks, by order. */
function callbacksByOrder(ctx: ChaosContext) {
  const by = new Map<string, Array<WebhookRecord & { claims: Claims }>>();
  for (const w of ctx.stack.remote.payment.webhooks()) {
    const claims = claimsOf(w.url);
    if (!claims) continue;
    const list = by.get(claims.o) ?? [];
    list.push({ ...w, claims });
    by.set(claims.o, list);
  }
  return by;
}

async function historyOf(ctx: ChaosContext, orderId: string) {
  return (await ctx.store.history(orderId, 500))?.items ?? [];
}

async function submitAll(ctx: ChaosContext, n: number, gapMs: number): Promise<void> {
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    pending.push(submitOrder(ctx, []));
    await sleep(gapMs);
  }
  await Promise.all(pending);
}

/** Every order Processed, with one charge; returns the violations and the count retried. */
async function everyOrderProcessed(ctx: ChaosContext): Promise<{ violations: string[]; retried: number }> {
  const violations: string[] = [];
  let retried = 0;
  for (const orderId of ctx.submitted.keys()) {
    const stored = await ctx.store.load(orderId);
    if (stored?.state.processState !== 'Processed')
      violations.push(`${orderId} ended ${stored?.state.processState ?? 'missing'}, not Processed`);
    if (stored && stored.state.failureCount > 0) retried += 1;
  }
  return { violations, retried };
}

function faulted(faults: FaultSettings): (ctx: ChaosContext) => void {
  return (ctx) => ctx.stack.remote.payment.setFaults({ seed: 25, ...faults });
}

export const waitingScenarios: Scenario[] = [
  {
    name: 'callback-three-copies',
    ...onOrder2,
    what: 'order@2: the payment service POSTs every callback three times; each attempt applied once (202), the copies answered 200',
    async run(ctx, n) {
      faulted({ callbackCopies: 3, callbackDelayMs: 300 })(ctx);
      await submitAll(ctx, n, 50);
      return 'callbacks x3';
    },
    async check(ctx) {
      const { violations, retried } = await everyOrderProcessed(ctx);
      let copies = 0;
      for (const [orderId, sent] of callbacksByOrder(ctx)) {
        const final = sent.filter((w) => w.claims.a === Math.max(...sent.map((x) => x.claims.a)));
        const applied = final.filter((w) => w.statuses.at(-1) === 202).length;
        const duplicates = final.filter((w) => w.statuses.at(-1) === 200).length;
        copies += duplicates;
        if (final.length !== 3 || applied !== 1 || duplicates !== 2)
          violations.push(
            `${orderId}: ${final.length} copies of the last attempt's callback answered ${final.map((w) => w.statuses.join('/')).join(', ')} (expected 202 once, 200 twice)`,
          );
      }
      return {
        violations,
        note: `${copies} duplicate callbacks answered 200; ${retried} orders retried`,
        unmet: copies === 0 ? ['no duplicate callback was delivered'] : [],
      };
    },
  },
  {
    name: 'callback-before-acceptance',
    ...onOrder2,
    what:
      "order@2: the payment service POSTs the callback before it answers the Agent's call with 202, so " +
      'the outcome reaches the route before the acceptance is written; kept and applied, never dropped',
    async run(ctx, n) {
      faulted({ callbackEarly: true })(ctx);
      await submitAll(ctx, n, 50);
      return 'callbacks before the 202';
    },
    async check(ctx) {
      const { violations, retried } = await everyOrderProcessed(ctx);
      let early = 0;
      for (const orderId of ctx.submitted.keys()) {
        const h = await historyOf(ctx, orderId);
        const answered = h.findIndex((e) => e.event === 'CallbackAnswered');
        const accepted = h.findIndex((e) => e.event === 'StepAccepted');
        if (answered >= 0 && (accepted < 0 || answered < accepted)) early += 1;
      }
      if (retried > 0)
        violations.push(`${retried} order(s) needed the Supervisor: an early callback was lost`);
      return {
        violations,
        note: `${early} callbacks applied before the acceptance was written`,
        unmet: early === 0 ? ['no callback arrived before its acceptance'] : [],
      };
    },
  },
  {
    name: 'callback-lost',
    ...onOrder2,
    quick: true, // the one in the quick set
    outageSeconds: waitOutage(2),
    what:
      "order@2: half the payment callbacks of an order's first two attempts are never sent; the step " +
      'times out at its complete-by, the Supervisor retries under the same key, the service answers again',
    async run(ctx, n) {
      faulted({ callbackLossRate: 0.5, callbackLossAttempts: 2, callbackDelayMs: 200 })(ctx);
      await submitAll(ctx, n, 50);
      return 'half the callbacks of attempts 1-2 lost';
    },
    async check(ctx) {
      const { violations, retried } = await everyOrderProcessed(ctx);
      const lost = ctx.stack.remote.payment.webhooks().filter((w) => w.outcome === 'lost').length;
      return {
        violations,
        note: `${lost} callbacks lost, ${retried} orders retried by the Supervisor`,
        unmet: lost === 0 || retried === 0 ? ['no callback was lost and retried'] : [],
      };
    },
  },
  {
    name: 'callback-after-complete-by',
    ...onOrder2,
    outageSeconds: waitOutage(1),
    what:
      "order@2: each order's first payment callback is sent 9 s after the 202, past the wait's 4 s " +
      'complete-by: the step has timed out and been retried, the late answer is a 409 in the history',
    async run(ctx, n) {
      faulted({ callbackLateMs: 9000, callbackLateAttempts: 1, callbackDelayMs: 200 })(ctx);
      await submitAll(ctx, n, 50);
      // The last late callbacks land after the orders are done; the drain waits for the orders only.
      await sleep(9000);
      return 'first callbacks 9 s late';
    },
    async check(ctx) {
      const { violations } = await everyOrderProcessed(ctx);
      let late = 0;
      let lateRows = 0;
      for (const [orderId, sent] of callbacksByOrder(ctx)) {
        const last = Math.max(...sent.map((w) => w.claims.a));
        for (const w of sent.filter((x) => x.claims.a < last)) {
          const status = w.statuses.at(-1);
          if (status === 409) late += 1;
          else if (status !== undefined)
            violations.push(`${orderId}: a callback of superseded attempt ${w.claims.a} answered ${status}`);
        }
        if ((await historyOf(ctx, orderId)).some((e) => e.event === 'LateCallback')) lateRows += 1;
      }
      if (lateRows < late)
        violations.push(
          `${late} late callbacks answered 409, but only ${lateRows} orders have a LateCallback row`,
        );
      return {
        violations,
        note: `${late} callbacks after complete-by answered 409 (LateCallback rows in ${lateRows} orders)`,
        unmet: late === 0 ? ['no callback arrived after its complete-by'] : [],
      };
    },
  },
  {
    name: 'forged-replayed-tokens',
    ...onOrder2,
    what:
      "order@2 while an attacker POSTs 'failed' outcomes with tokens altered (another step, another order), " +
      'signed with a key of its own, expired (signed with the real key), and replays applied tokens: none accepted',
    async run(ctx, n) {
      faulted({ callbackDelayMs: 300 })(ctx);
      const attack = startAttacker(ctx);
      await submitAll(ctx, n, 50);
      await sleep(3000);
      const tally = await attack.stop();
      attackTallies.set(ctx, tally);
      return `${tally.forged} forged and ${tally.replayed} replayed callbacks sent`;
    },
    async check(ctx) {
      const { violations, retried } = await everyOrderProcessed(ctx);
      const t = attackTallies.get(ctx)!;
      violations.push(...t.accepted);
      if (retried > 0) violations.push(`${retried} order(s) needed the Supervisor`);
      return {
        violations,
        note: `forged answered ${JSON.stringify(t.forgedStatuses)}, replays ${JSON.stringify(t.replayStatuses)}`,
        unmet: t.forged === 0 || t.replayed === 0 ? ['the attacker sent no forged or no replayed token'] : [],
      };
    },
  },
  {
    name: 'host-sigkill-mid-callback',
    ...onOrder2,
    outageSeconds: waitOutage(2) + 20,
    what:
      'order@2: the only host is SIGKILLed six times while payment callbacks arrive (some received and ' +
      'not yet written, some written and not yet answered); the service delivers again on the reset',
    async run(ctx, n) {
      faulted({ callbackDelayMs: 400 })(ctx);
      const submitting = submitAll(ctx, n, 40);
      let kills = 0;
      let aimed = 0;
      for (const at of [1500, 1500, 1200, 1800, 1500, 1500]) {
        await sleep(at);
        // Aimed at a callback the host is handling (its POST sent, not answered), within 3 s.
        if (await callbackInFlight(ctx, 3000)) aimed += 1;
        await crashHost(ctx, 200);
        kills += 1;
      }
      await submitting;
      return `${kills} SIGKILLs, ${aimed} while a callback was in flight`;
    },
    async check(ctx) {
      const { violations, retried } = await everyOrderProcessed(ctx);
      // Cut: the host took the POST and died before answering (reset, not refused); refused: it was down.
      let cut = 0;
      let refused = 0;
      let thenApplied = 0;
      let thenDuplicate = 0;
      let gaveUp = 0;
      for (const sent of callbacksByOrder(ctx).values()) {
        for (const w of sent) {
          const errors = w.errors ?? [];
          refused += errors.filter((e) => e === 'ECONNREFUSED').length;
          if (!errors.some((e) => e !== 'ECONNREFUSED')) continue;
          cut += 1;
          const last = w.statuses.at(-1);
          if (last === 202) thenApplied += 1;
          else if (last === 200) thenDuplicate += 1;
          // Six tries all during kills: the service gave up, a lost callback; the Supervisor's retry
          // asks again (every order must still end Processed, checked above).
          else if (w.statuses.length >= 6 && w.statuses.every((x) => x === 0)) gaveUp += 1;
          else
            violations.push(`a callback cut by a kill ended ${w.statuses.join('/')} (${errors.join(',')})`);
        }
      }
      return {
        violations,
        note:
          `${cut} callbacks cut by a kill mid-request, redelivered: applied ${thenApplied} (killed before the write), ` +
          `duplicate ${thenDuplicate} (after it), given up by the service ${gaveUp}; ${refused} tries refused while the host was down; ${retried} orders retried`,
        unmet: cut === 0 ? ['no callback was in flight at a kill'] : [],
      };
    },
  },
];

/** Waits until the payment service has a callback POST sent and not yet answered. */
async function callbackInFlight(ctx: ChaosContext, withinMs: number): Promise<boolean> {
  const end = Date.now() + withinMs;
  while (Date.now() < end) {
    const open = ctx.stack.remote.payment
      .webhooks()
      .some((w) => w.outcome !== 'lost' && w.statuses.length === 0);
    if (open) return true;
    await sleep(2);
  }
  return false;
}

interface AttackTally {
  forged: number;
  replayed: number;
  forgedStatuses: Record<number, number>;
  replayStatuses: Record<number, number>;
  /** Any forged request answered 2xx, any replay answered 202: each a violation. */
  accepted: string[];
}
const attackTallies = new WeakMap<ChaosContext, AttackTally>();

/** Forges and replays callbacks from what the payment service sent, until stopped. */
function startAttacker(ctx: ChaosContext): { stop(): Promise<AttackTally> } {
  const tally: AttackTally = { forged: 0, replayed: 0, forgedStatuses: {}, replayStatuses: {}, accepted: [] };
  const realKeys = parseSigningKeys(ctx.stack.env.CALLBACK_SIGNING_KEYS ?? '');
  const ownKey: SigningKey = { id: realKeys[0]?.id ?? 'local', secret: randomBytes(32) };
  const strangerKey: SigningKey = { id: 'attacker', secret: randomBytes(32) };
  const done = new Set<string>();
  let stopped = false;
  const post = async (url: string, body: unknown): Promise<number> => {
    try {
      const r = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      });
      await r.arrayBuffer();
      return r.status;
    } catch {
      return 0;
    }
  };
  const failed = { outcome: 'failed', error: { message: 'forged refusal' } };
  const loop = (async () => {
    while (!stopped) {
      const sent = ctx.stack.remote.payment.webhooks();
      const orders = [...new Set(sent.map((w) => claimsOf(w.url)?.o).filter(Boolean))] as string[];
      for (const w of sent) {
        if (stopped) break;
        const claims = claimsOf(w.url);
        if (!claims || done.has(w.url)) continue;
        done.add(w.url);
        const base = w.url.split('/callbacks/')[0];
        const [prefix, keyId, payload, signature] = tokenOf(w.url).split('.');
        const other = orders.find((o) => o !== claims.o) ?? claims.o;
        const alter = (c: Partial<Claims>) =>
          `${prefix}.${keyId}.${Buffer.from(JSON.stringify({ ...claims, ...c })).toString('base64url')}.${signature}`;
        const target = { orderId: claims.o, step: claims.s, run: claims.r, attempt: claims.a };
        const forged = [
          alter({ s: 'shipping' }),
          alter({ o: other }),
          alter({ a: claims.a + 1 }),
          mintToken([ownKey], { ...target, expiresAt: new Date(Date.now() + 3600_000) }),
          mintToken([strangerKey], { ...target, expiresAt: new Date(Date.now() + 3600_000) }),
          mintToken(realKeys, { ...target, expiresAt: new Date(Date.now() - 1000) }),
          `${prefix}.${keyId}.${payload}.${signature.slice(0, -2)}AA`,
        ];
        for (const token of forged) {
          const status = await post(`${base}/callbacks/${token}`, failed);
          tally.forged += 1;
          tally.forgedStatuses[status] = (tally.forgedStatuses[status] ?? 0) + 1;
          if (status >= 200 && status < 300)
            tally.accepted.push(`forged token for ${claims.o} answered ${status}`);
        }
      }
      // Replays of callbacks already applied: the same token again, with the same and another outcome.
      for (const w of sent) {
        if (stopped) break;
        if (!w.statuses.includes(202) || done.has(`replay ${w.url}`)) continue;
        done.add(`replay ${w.url}`);
        for (const body of [{ outcome: 'succeeded', reference: 'replay' }, failed]) {
          const status = await post(w.url, body);
          tally.replayed += 1;
          tally.replayStatuses[status] = (tally.replayStatuses[status] ?? 0) + 1;
          if (status === 202) tally.accepted.push(`replayed token ${w.url.slice(-12)} answered 202`);
        }
      }
      await sleep(100);
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return tally;
    },
  };
}
