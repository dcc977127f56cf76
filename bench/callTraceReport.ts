import { existsSync, readFileSync } from 'node:fs';
import { gateBacklogFigure } from './callThroughput.js';

/**
 * Where a limit's throughput goes (issue 26): the gates' trace (shared/agents/callTrace.ts) joined
 * with the service's own request log by order. Per call: the gate's start (decision) time, the
 * instance, the slot it was booked for when it waited, the service's receive time; per request:
 * its sent-backs, and where each re-delivery landed (the booking instance or another, with or
 * without a share there); per instance: how much of its granted rate it used.
 */
interface Ev {
  ev: 'arrive' | 'hold' | 'start' | 'wait' | 'grant' | 'renew' | 'look';
  inst: string;
  t: number;
  key?: string;
  at?: number;
  reason?: string;
  waited?: boolean;
  rate?: number;
  conc?: number;
  /** A renewal's writes (0: a look from standing aside, one read). */
  attempts?: number;
}

export interface ServiceCall {
  orderId: string;
  at: number;
  end: number;
}

const pct = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(s.length * q))] : Number.NaN;
};

export function traceReport(file: string, calls: ServiceCall[], rate: number, step = 'payment'): string[] {
  if (!existsSync(file)) return [`trace: no file ${file}`];
  const all = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Ev);
  const from = Math.min(...calls.map((c) => c.at)) - 5_000;
  const to = Math.max(...calls.map((c) => c.end));
  const events = all.filter((e) => e.t >= from && e.t <= to);
  const mine = events.filter(
    (e) => e.ev === 'grant' || (e.key?.includes(`:${step}:`) && e.key.endsWith(':do')),
  );
  const instances = [...new Set(mine.map((e) => e.inst))].sort();
  const short = new Map(instances.map((i, n) => [i, String.fromCharCode(97 + n)]));
  const out: string[] = [];
  const byOrder = new Map<string, Ev[]>();
  for (const e of mine) {
    if (!e.key) continue;
    const id = e.key.split(':')[0];
    byOrder.set(id, [...(byOrder.get(id) ?? []), e]);
  }
  // Grants over time, per instance: [t, rate, conc] ascending.
  const grants = new Map<string, Ev[]>();
  for (const e of mine.filter((x) => x.ev === 'grant'))
    grants.set(e.inst, [...(grants.get(e.inst) ?? []), e]);
  const grantAt = (inst: string, t: number): { rate: number; conc: number } => {
    const g = (grants.get(inst) ?? []).filter((x) => x.t <= t).at(-1);
    return { rate: g?.rate ?? 0, conc: g?.conc ?? 0 };
  };

  // 0. The limit while requests waited at the gates (not upstream of them).
  const reached = new Map<string, number>();
  const started = new Map<string, number>();
  for (const e of mine) {
    if (!e.key || (e.ev !== 'wait' && e.ev !== 'start')) continue;
    if (!reached.has(e.key)) reached.set(e.key, e.t);
    if (e.ev === 'start' && !started.has(e.key)) started.set(e.key, e.t);
  }
  if (started.size > 0) {
    const g = gateBacklogFigure(reached, started, rate);
    out.push(
      `trace: limit while at least ${Math.ceil(rate)} requests waited at the gates: ${g.starts} starts in ${g.seconds} s = ` +
        `${g.perSecond.toFixed(2)}/s (${((100 * g.perSecond) / rate).toFixed(0)} % of ${rate})`,
    );
  }

  // 1. decision -> service receive
  const lags: number[] = [];
  const received: Array<{ start: number; at: number; inst: string }> = [];
  for (const c of calls) {
    const s = (byOrder.get(c.orderId) ?? []).filter((e) => e.ev === 'start' && e.t <= c.at + 50).at(-1);
    if (!s) continue;
    lags.push(c.at - s.t);
    received.push({ start: s.t, at: c.at, inst: s.inst });
  }
  out.push(
    `trace: ${instances.length} instances; decision -> service receive: median ${pct(lags, 0.5)} ms, p95 ${pct(lags, 0.95)} ms, max ${Math.max(...lags)} ms (${lags.length} calls joined)`,
  );
  // Busiest 1 s window by decision time vs by receive time.
  const busiest = (ts: number[]) => {
    const s = [...ts].sort((a, b) => a - b);
    let best = 0;
    for (let i = 0, j = 0; i < s.length; i++) {
      while (s[i] - s[j] >= 1000) j++;
      best = Math.max(best, i - j + 1);
    }
    return best;
  };
  out.push(
    `trace: busiest 1 s window by gate decision ${busiest(received.map((r) => r.start))}, by service receive ${busiest(received.map((r) => r.at))}`,
  );

  // 2. sent-backs per request and where the re-delivery landed
  let waits = 0;
  let sameInst = 0;
  let otherWithShare = 0;
  let otherWithout = 0;
  const late: number[] = [];
  const reasons = new Map<string, number>();
  const perRequest: number[] = [];
  for (const evs of byOrder.values()) {
    const ws = evs.filter((e) => e.ev === 'wait');
    perRequest.push(ws.length);
    for (const w of ws) {
      waits += 1;
      reasons.set(
        `${short.get(w.inst)}:${w.reason}`,
        (reasons.get(`${short.get(w.inst)}:${w.reason}`) ?? 0) + 1,
      );
      const next = evs.find((e) => e.ev === 'arrive' && e.t > w.t);
      if (!next) continue;
      late.push(next.t - (w.at ?? next.t));
      if (next.inst === w.inst) sameInst += 1;
      else {
        const g = grantAt(next.inst, next.t);
        if (g.rate > 0 && g.conc > 0) otherWithShare += 1;
        else otherWithout += 1;
      }
    }
  }
  out.push(
    `trace: ${waits} sent-backs over ${perRequest.length} requests (mean ${(waits / Math.max(1, perRequest.length)).toFixed(2)}, max ${Math.max(0, ...perRequest)}); ` +
      `re-delivered to the booking instance ${sameInst}, to another with a share ${otherWithShare}, to another without ${otherWithout}; ` +
      `arrival after the booked slot median ${pct(late, 0.5)} ms, p95 ${pct(late, 0.95)} ms`,
  );
  out.push(
    `trace: sent-backs by instance:reason ${[...reasons.entries()]
      .sort()
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
  );

  // What the line holds: how long an invocation waited in place, and how it left.
  const heldFor: number[] = [];
  let heldStarted = 0;
  let heldSentBack = 0;
  for (const evs of byOrder.values())
    for (const h of evs.filter((e) => e.ev === 'hold')) {
      const left = evs.find((e) => e.inst === h.inst && e.t >= h.t && (e.ev === 'start' || e.ev === 'wait'));
      if (!left) continue;
      heldFor.push(left.t - h.t);
      if (left.ev === 'start') heldStarted += 1;
      else heldSentBack += 1;
    }
  const starts = mine.filter((e) => e.ev === 'start').length;
  out.push(
    `trace: held in place ${heldFor.length} times (${heldStarted} then started = ${((100 * heldStarted) / Math.max(1, starts)).toFixed(0)} % of ${starts} starts, ${heldSentBack} then sent back); ` +
      `held median ${pct(heldFor, 0.5)} ms, p95 ${pct(heldFor, 0.95)} ms, max ${Math.max(0, ...heldFor)} ms`,
  );

  // 3. per instance: granted rate used, idle slot time while others sent back
  const span = (Math.max(...calls.map((c) => c.at)) - Math.min(...calls.map((c) => c.at))) / 1000;
  const t0 = Math.min(...calls.map((c) => c.at));
  const t1 = Math.max(...calls.map((c) => c.at));
  const endOf = new Map(calls.map((c) => [c.orderId, c.end]));
  for (const inst of instances) {
    // Granted rate-seconds over the span (step function), starts made.
    let rateSeconds = 0;
    let concSeconds = 0;
    for (let t = t0; t < t1; t += 100) {
      const g = grantAt(inst, t);
      rateSeconds += (g.rate * 100) / 1000;
      concSeconds += (g.conc * 100) / 1000;
    }
    const starts = mine.filter((e) => e.inst === inst && e.ev === 'start' && e.t >= t0 && e.t <= t1);
    // Busy slot time: from start to the service's answer.
    let busy = 0;
    for (const s of starts) busy += Math.max(0, (endOf.get(s.key!.split(':')[0]) ?? s.t) - s.t);
    const waitsHere = mine.filter((e) => e.inst === inst && e.ev === 'wait' && e.t >= t0 && e.t <= t1).length;
    const holds = mine.filter((e) => e.inst === inst && e.ev === 'hold' && e.t >= t0 && e.t <= t1).length;
    out.push(
      `trace: ${short.get(inst)}: granted ${(rateSeconds / span).toFixed(2)}/s and ${(concSeconds / span).toFixed(2)} slots on average; ` +
        `started ${(starts.length / span).toFixed(2)}/s (${((100 * starts.length) / Math.max(1e-9, rateSeconds)).toFixed(0)} % of its rate), ` +
        `slots busy ${((100 * busy) / 1000 / Math.max(1e-9, concSeconds)).toFixed(0)} %; held ${holds}, sent back ${waitsHere}`,
    );
  }
  // Seconds in which the granted rates summed below the limit, and idle holders while someone sent back.
  let idleWhileSendingBack = 0;
  const waitEvs = mine.filter((e) => e.ev === 'wait' && e.t >= t0 && e.t <= t1);
  const startsAll = mine.filter((e) => e.ev === 'start');
  for (const w of waitEvs) {
    const idle = instances.some((inst) => {
      if (inst === w.inst) return false;
      const g = grantAt(inst, w.t);
      if (!(g.rate > 0 && g.conc > 0)) return false;
      const inFlight = startsAll.filter(
        (s) => s.inst === inst && s.t <= w.t && (endOf.get(s.key!.split(':')[0]) ?? s.t) > w.t,
      ).length;
      const recent = startsAll.filter((s) => s.inst === inst && s.t > w.t - 1000 && s.t <= w.t).length;
      return inFlight < g.conc && recent < Math.floor(g.rate);
    });
    if (idle) idleWhileSendingBack += 1;
  }
  out.push(
    `trace: ${idleWhileSendingBack} of ${waitEvs.length} sent-backs happened while another instance had a free slot and rate left in its window`,
  );
  // What the lease row cost over the same calls: a renewal reads and writes once per attempt (one
  // read standing aside); a look before a call (shared/agents/pauseNews.ts) is one read.
  const rowTx = (evs: Ev[]) =>
    evs.reduce((a, e) => a + (e.ev === 'look' ? 1 : Math.max(1, e.attempts ?? 1) + (e.attempts ?? 1)), 0);
  const rowEvents = events.filter((e) => e.ev === 'renew' || e.ev === 'look');
  const renewals = rowEvents.filter((e) => e.ev === 'renew').length;
  const tx = rowTx(rowEvents);
  // Per second, from 5 s before the first call (the renewals that set the grants up) to the last
  // call's end, and over the calls' second half alone: the grants settle in the first seconds
  // (renewals a window apart while they move), then each instance renews once a lease. The row's
  // work is per instance and lease, so its cost per call falls as the rate grows.
  const seconds = Math.max(1, (to - from) / 1000);
  const half = (from + 5_000 + to) / 2;
  const settled = rowTx(rowEvents.filter((e) => e.t >= half)) / Math.max(1, (to - half) / 1000);
  out.push(
    `trace: lease row: ${renewals} renewals and ${rowEvents.length - renewals} looks for a pause before a call, ` +
      `${tx} table transactions in ${seconds.toFixed(1)} s (${(tx / seconds).toFixed(2)}/s; ` +
      `${(tx / Math.max(1, starts)).toFixed(3)} per call at this rate); ${settled.toFixed(2)}/s over the calls' second half`,
  );
  return out;
}

/**
 * For a set of orders: how long their requests waited for the limited service (first arrival at
 * a gate to the start) and how often they were sent back, to tell that wait from the rest of
 * their time to terminal.
 */
export function waitReport(
  file: string,
  label: string,
  orderIds: readonly string[],
  step = 'payment',
): string {
  if (!existsSync(file)) return `trace: no file ${file}`;
  const want = new Set(orderIds);
  const by = new Map<string, Ev[]>();
  for (const l of readFileSync(file, 'utf8').split('\n')) {
    if (!l.trim()) continue;
    const e = JSON.parse(l) as Ev;
    if (!e.key?.includes(`:${step}:`) || !e.key.endsWith(':do')) continue;
    const id = e.key.split(':')[0];
    if (want.has(id)) by.set(id, [...(by.get(id) ?? []), e]);
  }
  const waited: number[] = [];
  const sentBack: number[] = [];
  for (const evs of by.values()) {
    const start = evs.find((e) => e.ev === 'start');
    if (!start) continue;
    waited.push(start.t - evs[0].t);
    sentBack.push(evs.filter((e) => e.ev === 'wait').length);
  }
  const mean = sentBack.reduce((a, b) => a + b, 0) / Math.max(1, sentBack.length);
  return (
    `trace: ${label}: ${waited.length} requests waited for ${step} median ${pct(waited, 0.5)} ms, p95 ${pct(waited, 0.95)} ms ` +
    `(first arrival at a gate to start), sent back ${mean.toFixed(1)} times on average`
  );
}
