import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { address, addHost, closeContext, openContext, sleep, type ChaosContext } from '../chaos/harness.js';
import { isTerminal, orderIdFromIdempotencyKey } from '../shared/domain/index.js';
import { throughputFigures } from './callThroughput.js';
import { traceReport, waitReport } from './callTraceReport.js';
import {
  awaitStagedBacklog,
  paymentHostSettings,
  stagedSettings,
  startPaymentHosts,
} from './stagedBacklog.js';
import type { SpawnedLocalHost } from '../local/host/spawn.js';
import { spawnPaymentService, type ServiceProcess } from './serviceProcess.js';
import { terminalTimes } from './terminalTimes.js';
import type { StoredOrder } from '../shared/stateStore/index.js';

/**
 * Issue 26's proof, measured at the demo payment service's own request log (receivedAt and
 * answeredAt of every call): several hosts share one payment limit. Three phases in one stack:
 * (1) the limit under a backlog: no 1 s window above the limit plus 10 %, never more at once than
 * allowed, throughput near the limit, nothing lost, nothing in Error; (2) a 429 storm with
 * Retry-After: no call reaches the service from 1 s after the first 429 until the Retry-After
 * ends, and calls resume after the storm; (3) a burst from one customer: the others' p95 time to
 * terminal with the burst against without it.
 *
 * With `--staged` the limit phase drains a backlog staged in the payment queue before the payment
 * hosts start (bench/stagedBacklog.ts): the way to judge a limit faster than this machine runs the
 * whole pipeline (20 calls/s on two cores). With `--staged --alone` the payment hosts run the
 * payment Agent only while the charges are measured, and the rest of the pipeline runs after.
 *
 *   node dist/bench/callLimits.js [--hosts 4] [--rate 5] [--concurrent 2] [--orders 120] [--staged [--alone]]
 */
const { values } = parseArgs({
  options: {
    hosts: { type: 'string', default: '4' },
    rate: { type: 'string', default: '5' },
    concurrent: { type: 'string', default: '2' },
    orders: { type: 'string', default: '120' },
    burst: { type: 'string', default: '60' },
    others: { type: 'string', default: '10' },
    'storm-seconds': { type: 'string', default: '6' },
    /**
     * The storm's orders trickle in, one every this many ms from 3 s before it to its end, instead
     * of a backlog: each host then calls payment seldom, the limit does not bind (leases are long),
     * and the Retry-After is the storm's length. A host that has not had a 429 of its own learns of
     * the pause only from the lease row.
     */
    'storm-trickle-ms': { type: 'string' },
    'latency-ms': { type: 'string', default: '300' },
    /**
     * CALL_BUDGET_LEASE_SECONDS of every host: how long a share lasts before it is renewed. The
     * product's default (5); sessions 9-40 measured with 1.
     */
    'lease-seconds': { type: 'string', default: '5' },
    verbose: { type: 'boolean', default: false },
    /** Trace every gate decision to this file and print where the limit's throughput went. */
    trace: { type: 'string' },
    'customer-share': { type: 'string' },
    /** CUSTOMER_INTAKE_PER_SECOND of every host: each customer's orders a second per instance (off by default). */
    'customer-intake': { type: 'string' },
    'limit-only': { type: 'boolean', default: false },
    staged: { type: 'boolean', default: false },
    /** With --staged: how long staging may take (it also sets the step timeout above it). */
    'stage-seconds': { type: 'string', default: '150' },
    /**
     * With --staged: the limiter alone. The stack's host stops once the backlog is staged and the
     * payment hosts run the payment Agent only; the rest of the pipeline (the Scheduler taking the
     * replies, the steps after payment) runs once the charges are measured. Two cores run that
     * pipeline at about 8 orders/s: alongside a drain at 20/s it loads the machine the limiter's
     * lease renewals and reads run on.
     */
    alone: { type: 'boolean', default: false },
  },
});
const hosts = Number(values.hosts);
const rate = Number(values.rate);
const concurrent = Number(values.concurrent);
const orders = Number(values.orders);
const stormSeconds = Number(values['storm-seconds']);
const trickleMs = values['storm-trickle-ms'] === undefined ? undefined : Number(values['storm-trickle-ms']);
const staged = values.staged;
const paymentAlone = staged && values.alone;
const stageSeconds = Number(values['stage-seconds']);

interface Call {
  at: number;
  end: number;
  status: number | null;
  key: string | null;
}

/** When each order's first POST was sent (its 202 time is `ctx.submitted`'s `at`). */
const sentAt = new Map<string, number>();

async function submit(ctx: ChaosContext, base: string, customerId: string): Promise<string | undefined> {
  const key = randomUUID();
  ctx.attempted.add(orderIdFromIdempotencyKey(key));
  sentAt.set(orderIdFromIdempotencyKey(key), Date.now());
  for (let tries = 0; tries < 30; tries++) {
    try {
      const res = await fetch(`${base}/orders`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-functions-key': ctx.stack.env.FUNCTIONS_LOCAL_KEY ?? ctx.stack.functionKey,
          'idempotency-key': key,
        },
        body: JSON.stringify({
          customerId,
          items: [{ sku: 'SKU-1', quantity: 1, unitPrice: 10 }],
          shippingAddress: address,
        }),
        signal: AbortSignal.timeout(15_000),
      });
      const body = (await res.json().catch(() => ({}))) as { orderId?: string };
      if (res.status === 202 && typeof body.orderId === 'string') {
        ctx.submitted.set(body.orderId, { orderId: body.orderId, at: Date.now(), viaStore: false, skus: [] });
        return body.orderId;
      }
    } catch {
      // a busy host: try again with the same key
    }
    await sleep(1000);
  }
  ctx.refused += 1;
  return undefined;
}

async function charges(
  payment: ServiceProcess,
  from: number,
  to = Number.POSITIVE_INFINITY,
): Promise<Call[]> {
  return (await payment.ledger()).requests
    .filter((r) => r.operation === 'charge')
    .map((r) => ({
      at: Date.parse(r.receivedAt),
      end: r.answeredAt ? Date.parse(r.answeredAt) : Date.parse(r.receivedAt),
      status: r.status,
      key: r.idempotencyKey,
    }))
    .filter((c) => c.at >= from && c.at < to);
}

function busiestWindow(calls: Call[]): number {
  const at = calls.map((c) => c.at).sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < at.length; i++) {
    while (at[i] - at[j] >= 1000) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

function mostAtOnce(calls: Call[]): number {
  const events = calls.flatMap((c) => [
    { t: c.at, d: 1 },
    { t: c.end, d: -1 },
  ]);
  events.sort((a, b) => a.t - b.t || a.d - b.d);
  let now = 0;
  let peak = 0;
  for (const e of events) {
    now += e.d;
    peak = Math.max(peak, now);
  }
  return peak;
}

const p95 = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(s.length * 0.95))] : Number.NaN;
};

/**
 * Waits until the payment service has answered a charge for every one of `ids` (its own log, in
 * its own process), or the deadline. The drain after it reads the orders once they are done:
 * while the limit was measured it read all of them every half second, each read a scan of the
 * Orders table in Azurite, load the measurement added to what it measured.
 */
async function awaitCharged(payment: ServiceProcess, ids: string[], from: number, deadlineMs: number) {
  const want = new Set(ids);
  while (Date.now() < deadlineMs) {
    const charged = new Set((await charges(payment, from)).map((c) => (c.key ?? '').split(':')[0]));
    if ([...want].every((id) => charged.has(id))) return;
    await sleep(500);
  }
}

/** When each of `ids` became terminal (the store's record), or the deadline. */
function drainTimed(ctx: ChaosContext, ids: string[], deadlineMs: number): Promise<Map<string, number>> {
  const from = Math.min(...ids.map((id) => ctx.submitted.get(id)?.at ?? Date.now())) - 5_000;
  return terminalTimes(ctx.store, ids, new Date(from), deadlineMs);
}

/** Where each order the drain left open or in Error stands: the lines to start a diagnosis from. */
function notTerminal(ids: string[], finals: (StoredOrder | null)[]): string[] {
  return ids.flatMap((id, i) => {
    const s = finals[i]?.state;
    if (s && isTerminal(s.processState) && s.processState !== 'Error') return [];
    if (!s) return [`  ${id}: not found`];
    const steps = s.steps
      .map((st) => `${st.name}=${st.status}#${st.attempt}${st.lastError ? ` (${st.lastError})` : ''}`)
      .join(', ');
    return [
      `  ${id}: ${s.processState}, failures ${s.failureCount}, complete-by ${s.completeBy?.toISOString() ?? '-'}, ` +
        `updated ${s.updatedAt.toISOString()}; ${steps}`,
    ];
  });
}

async function main(): Promise<void> {
  const started = Date.now();
  // The payment service in its own process: its log is the measurement (bench/serviceProcess.ts).
  const payment = await spawnPaymentService();
  const ctx = await openContext({
    settings: {
      ...payment.setting,
      PAYMENT_MAX_CALLS_PER_SECOND: String(rate),
      PAYMENT_MAX_CONCURRENT_CALLS: String(concurrent),
      CALL_BUDGET_LEASE_SECONDS: values['lease-seconds'],
      STEP_TIMEOUT_SECONDS: '5',
      ...(values.trace ? { CALL_BUDGET_TRACE_FILE: values.trace } : {}),
      ...(values['customer-share'] ? { CALL_BUDGET_CUSTOMER_SHARE: values['customer-share'] } : {}),
      ...(values['customer-intake'] ? { CUSTOMER_INTAKE_PER_SECOND: values['customer-intake'] } : {}),
      ...(staged ? stagedSettings(stageSeconds) : {}),
    },
    verbose: values.verbose,
  }).catch(async (e: unknown) => {
    await payment.stop();
    throw e;
  });
  const failures: string[] = [];
  const out = (line: string) => console.log(line);
  try {
    const extra = [];
    // Staged: the stack's host takes the orders up to payment; the payment hosts start later.
    if (!staged) for (let i = 1; i < hosts; i++) extra.push(await addHost(ctx));
    let urls = [ctx.stack.baseUrl, ...extra.map((h) => h.baseUrl)];
    let paymentHosts: SpawnedLocalHost[] = [];
    await payment.setFaults({ latencyMs: Number(values['latency-ms']) });
    out(
      `call limits: ${hosts} hosts${staged ? ' (staged backlog)' : ''}${paymentAlone ? ' running the payment Agent alone' : ''}, payment limited to ${rate} calls/s and ${concurrent} at once, latency ${values['latency-ms']} ms`,
    );

    // 1. The limit under a backlog.
    const t1 = Date.now();
    const submitted1: Promise<string | undefined>[] = [];
    for (let i = 0; i < orders; i++) {
      submitted1.push(submit(ctx, urls[i % urls.length], `customer-${i % 20}`));
      await sleep(20);
    }
    const ids1 = (await Promise.all(submitted1)).filter((x): x is string => x !== undefined);
    if (staged) {
      await awaitStagedBacklog(ctx, ids1.length, stageSeconds * 1000, out);
      if (paymentAlone) await ctx.stack.killHost('SIGTERM');
      paymentHosts = await startPaymentHosts(ctx, hosts, paymentAlone);
      urls = paymentHosts.map((h) => h.baseUrl);
    }
    await awaitCharged(payment, ids1, t1, Date.now() + 300_000);
    if (paymentAlone) {
      out("alone: every charge made; the stack's host starts again for the rest of the pipeline");
      await ctx.stack.startHost();
    }
    await drainTimed(ctx, ids1, Date.now() + 300_000);
    const calls1 = await charges(payment, t1);
    const span = (Math.max(...calls1.map((c) => c.at)) - Math.min(...calls1.map((c) => c.at))) / 1000;
    const throughput = (calls1.length - 1) / span;
    const window1 = busiestWindow(calls1);
    const atOnce1 = mostAtOnce(calls1);
    const finals1 = await Promise.all(ids1.map((id) => ctx.store.load(id)));
    const errors1 = finals1.filter((s) => s?.state.processState === 'Error').length;
    const open1 = finals1.filter((s) => !s || !isTerminal(s.state.processState)).length;
    // Each order's first charge: the backlog figure counts orders started, not retried calls.
    const firstCharge = new Map<string, number>();
    for (const c of calls1) {
      const id = (c.key ?? '').split(':')[0];
      firstCharge.set(id, Math.min(firstCharge.get(id) ?? c.at, c.at));
    }
    const figures = throughputFigures([...firstCharge.values()], ids1.length, rate);
    out(
      `limit: ${ids1.length} orders, ${calls1.length} charges in ${span.toFixed(1)} s = ${throughput.toFixed(2)}/s ` +
        `(${((100 * throughput) / rate).toFixed(0)} % of ${rate}); busiest 1 s window ${window1} (allowed ${Math.floor(rate * 1.1)}); ` +
        `most at once ${atOnce1} (allowed ${concurrent}); not terminal ${open1}; Error ${errors1}; refused at submit ${ctx.refused}`,
    );
    out(
      `limit while a backlog waited (first charge until fewer than ${Math.ceil(rate)} orders unstarted): ` +
        `${figures.backlogStarts} starts in ${figures.backlogSeconds.toFixed(1)} s = ${figures.backlog.toFixed(2)}/s ` +
        `(${((100 * figures.backlog) / rate).toFixed(0)} % of ${rate}, the issue's >= 90 % is judged on this); ` +
        `whole run ${figures.whole.toFixed(2)}/s (${((100 * figures.whole) / rate).toFixed(0)} %)`,
    );
    if (values.trace) {
      // The service's own log beside the gates' trace, for analyses the report does not make.
      writeFileSync(`${values.trace}.service.json`, JSON.stringify(calls1));
      for (const line of traceReport(
        values.trace,
        calls1.map((c) => ({ orderId: (c.key ?? '').split(':')[0], at: c.at, end: c.end })),
        rate,
      ))
        out(line);
    }
    if (window1 > Math.floor(rate * 1.1)) failures.push(`busiest window ${window1}`);
    if (atOnce1 > concurrent) failures.push(`${atOnce1} at once`);
    // Judged while a backlog waited: in the tail fewer requests than the limit remain, so no
    // limiter can fill it there (the whole-run figure is printed beside it).
    if (!(figures.backlog >= 0.9 * rate))
      failures.push(`throughput while a backlog waited ${figures.backlog.toFixed(2)}/s below 90 %`);
    if (open1 > 0 || errors1 > 0 || ctx.refused > 0) failures.push('lost or Error in the limit phase');
    for (const line of notTerminal(ids1, finals1)) out(line);

    if (values['limit-only']) return;
    if (staged) {
      // The storm and the burst on as many hosts each running every function, as instances do in
      // Azure: the staged layout left every step but payment on the stack's one host (the burst's
      // others then waited 35-42 s behind one process's Scheduler and unlimited Agents).
      for (const h of paymentHosts) await h.kill('SIGTERM');
      await ctx.stack.killHost('SIGTERM');
      const full = await Promise.all(
        Array.from({ length: hosts }, () =>
          addHost(ctx, { ...paymentHostSettings(false), STEP_TIMEOUT_SECONDS: '5' }),
        ),
      );
      urls = full.map((h) => h.baseUrl);
      out(`storm and burst: ${hosts} hosts, each running every function`);
    }
    // 2. A 429 storm.
    const t2 = Date.now();
    const submitted2: Promise<string | undefined>[] = [];
    let trickling = true;
    const trickle =
      trickleMs === undefined
        ? undefined
        : (async () => {
            for (let i = 0; trickling; i++) {
              submitted2.push(submit(ctx, urls[i % urls.length], `customer-${i % 20}`));
              await sleep(trickleMs);
            }
          })();
    for (let i = 0; trickle === undefined && i < Math.ceil(orders / 2); i++) {
      submitted2.push(submit(ctx, urls[i % urls.length], `customer-${i % 20}`));
      await sleep(20);
    }
    await sleep(3_000);
    const retryAfter = trickle === undefined ? 3 : stormSeconds;
    await payment.setFaults({
      latencyMs: Number(values['latency-ms']),
      answerStatus: 429,
      retryAfterSeconds: retryAfter,
    });
    const stormStart = Date.now();
    await sleep(stormSeconds * 1000);
    trickling = false;
    await trickle;
    await payment.setFaults({ latencyMs: Number(values['latency-ms']) });
    const stormEnd = Date.now();
    const ids2 = (await Promise.all(submitted2)).filter((x): x is string => x !== undefined);
    await drainTimed(ctx, ids2, Date.now() + 300_000);
    const calls2 = await charges(payment, t2);
    if (values.trace)
      writeFileSync(`${values.trace}.storm.json`, JSON.stringify({ stormStart, stormEnd, calls: calls2 }));
    const first429 = Math.min(...calls2.filter((c) => c.status === 429).map((c) => c.at));
    const inPause = calls2.filter((c) => c.at > first429 + 1000 && c.at < first429 + retryAfter * 1000);
    const refused = calls2.filter((c) => c.status === 429).length;
    const afterStorm = calls2.filter((c) => c.at >= stormEnd && c.status === 200).length;
    const finals2 = await Promise.all(ids2.map((id) => ctx.store.load(id)));
    const errors2 = finals2.filter((s) => s?.state.processState === 'Error').length;
    const open2 = finals2.filter((s) => !s || !isTerminal(s.state.processState)).length;
    out(
      `storm: ${stormSeconds} s of 429 (Retry-After ${retryAfter} s${trickle ? `, orders trickling one every ${trickleMs} ms` : ''}) ` +
        `from +${((first429 - stormStart) / 1000).toFixed(1)} s; ` +
        `${refused} calls refused; calls reaching the service from 1 s after the first 429 to its Retry-After: ${inPause.length}; ` +
        `charges after the storm ${afterStorm}; not terminal ${open2}; Error ${errors2}`,
    );
    if (inPause.length > 0) failures.push(`${inPause.length} calls during the pause`);
    if (afterStorm === 0) failures.push('no call after the storm');
    if (open2 > 0 || errors2 > 0) failures.push('lost or Error in the storm phase');
    for (const line of notTerminal(ids2, finals2)) out(line);

    // 3. A burst from one customer: the others alone first, then with the burst.
    const others = Number(values.others);
    const alone: Promise<string | undefined>[] = [];
    const t3 = Date.now();
    for (let i = 0; i < others; i++) alone.push(submit(ctx, urls[i % urls.length], `other-${i}`));
    const aloneIds = (await Promise.all(alone)).filter((x): x is string => x !== undefined);
    const aloneDone = await drainTimed(ctx, aloneIds, Date.now() + 300_000);
    // Each order's time to terminal, from its 202 or from sending its first POST.
    const accepted = (id: string) => ctx.submitted.get(id)!.at;
    const sent = (id: string) => sentAt.get(id)!;
    const untilDone = (ids: string[], done: Map<string, number>, from: (id: string) => number) =>
      ids.map((id) => (done.get(id) ?? Number.NaN) - from(id));
    const aloneTimes = untilDone(aloneIds, aloneDone, accepted);
    const aloneFromSend = untilDone(aloneIds, aloneDone, sent);
    void t3;
    const burstIds: Promise<string | undefined>[] = [];
    for (let i = 0; i < Number(values.burst); i++)
      burstIds.push(submit(ctx, urls[i % urls.length], 'burst-customer'));
    await sleep(1_000);
    const mixed: Promise<string | undefined>[] = [];
    for (let i = 0; i < others; i++) mixed.push(submit(ctx, urls[i % urls.length], `other-${i}`));
    const mixedIds = (await Promise.all(mixed)).filter((x): x is string => x !== undefined);
    const burstDone = (await Promise.all(burstIds)).filter((x): x is string => x !== undefined);
    const mixedDone = await drainTimed(ctx, [...mixedIds, ...burstDone], Date.now() + 300_000);
    const mixedTimes = untilDone(mixedIds, mixedDone, accepted);
    const mixedFromSend = untilDone(mixedIds, mixedDone, sent);
    const ratio = p95(mixedTimes) / p95(aloneTimes);
    // From the POST's sending as well: the time the client waited for its 202 counts for it too.
    const ratioFromSend = p95(mixedFromSend) / p95(aloneFromSend);
    const seconds = (ms: number) => (ms / 1000).toFixed(1);
    out(
      `burst: ${burstDone.length} orders of one customer, ${mixedIds.length} of others 1 s later: others' p95 time to terminal ` +
        `from their 202 ${seconds(p95(mixedTimes))} s with the burst vs ${seconds(p95(aloneTimes))} s alone (ratio ${ratio.toFixed(2)}); ` +
        `from sending the POST ${seconds(p95(mixedFromSend))} vs ${seconds(p95(aloneFromSend))} s (ratio ${ratioFromSend.toFixed(2)}); ` +
        `the burst's p95 ${seconds(p95(untilDone(burstDone, mixedDone, sent)))} s from sending`,
    );
    const answered = (ids: string[]) => p95(ids.map((id) => accepted(id) - sent(id)));
    out(
      `burst: the others' 202 came at p95 ${seconds(answered(mixedIds))} s after sending with the burst, ` +
        `${seconds(answered(aloneIds))} s alone; the burst's at p95 ${seconds(answered(burstDone))} s`,
    );
    if (values.trace) {
      // Who was who, with when each was accepted and finished, for analyses the report does not make.
      const times = (ids: string[], done: Map<string, number>) =>
        ids.map((id) => ({ id, at: accepted(id), done: done.get(id) ?? null }));
      writeFileSync(
        `${values.trace}.burst.json`,
        JSON.stringify({
          alone: times(aloneIds, aloneDone),
          mixed: times(mixedIds, mixedDone),
          burst: times(burstDone, mixedDone),
        }),
      );
      out(waitReport(values.trace, 'others alone', aloneIds));
      out(waitReport(values.trace, 'others with the burst', mixedIds));
      out(waitReport(values.trace, 'the burst', burstDone));
    }
    if (!(ratio <= 2)) failures.push(`burst ratio ${ratio.toFixed(2)}`);
    if (!(ratioFromSend <= 2)) failures.push(`burst ratio from sending ${ratioFromSend.toFixed(2)}`);
  } finally {
    await closeContext(ctx);
    await payment.stop();
  }
  out(
    `${failures.length === 0 ? 'PASS' : `FAIL: ${failures.join('; ')}`} in ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  process.exitCode = failures.length === 0 ? 0 : 1;
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 2;
});
