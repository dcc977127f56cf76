import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  defaultCustomerShare,
  emptyBudgetRow,
  newDesk,
  nextTurn,
  offer,
  pumpLine,
  release,
  renewGrant,
  type BudgetRow,
  type CallLimits,
  type Desk,
  returnSpacingMs,
  type LineOptions,
} from '../../shared/domain/index.js';

const options: LineOptions = {
  customerShare: 0.5,
  callMs: 350,
  leaseMs: 1_100,
  horizonMs: 10_000,
  maxHoldMs: 50,
  holdMs: 1_000,
};

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Sim {
  starts: Array<{ at: number; end: number; key: string; customer: string; since: number }>;
  waits: number;
  requests: number;
}

/**
 * Instances sharing one service's limit the way the lease gives it, with requests delivered to any
 * instance (competing consumers) and sent back ones delivered again up to 150 ms after their slot
 * (the broker's lateness here), calls taking 300-400 ms.
 */
function simulate(
  limits: CallLimits,
  hosts: number,
  arrivals: Array<{ at: number; customer: string }>,
  seed = 1,
  customerShare = options.customerShare,
): Sim {
  const random = prng(seed);
  let row: BudgetRow = emptyBudgetRow;
  const desks: Desk[] = [];
  for (let h = 0; h < hosts; h++) desks.push(newDesk());
  // Steady grants: every instance wants more than the limit; a few rounds of renewals.
  for (let round = 0; round < 4; round++)
    for (let h = 0; h < hosts; h++) {
      const r = renewGrant(row, `h${h}`, { rate: 100, concurrency: 100 }, limits, round * 1_500 + h, 60_000);
      row = r.row;
    }
  // As the gate does: returns paced for the instances holding slots.
  const holders = row.grants.filter((g) => g.concurrency > 0).length;
  const optionsOf = (holds: boolean): LineOptions => {
    const spacing = returnSpacingMs(
      limits.maxCallsPerSecond ?? Number.POSITIVE_INFINITY,
      holders,
      hosts,
      holds,
    );
    return { ...options, customerShare, ...(spacing !== undefined ? { returnSpacingMs: spacing } : {}) };
  };
  const opts: LineOptions[] = [];
  for (let h = 0; h < hosts; h++) {
    const g = row.grants.find((x) => x.instance === `h${h}`)!;
    desks[h].pacer.rate = g.rate;
    desks[h].pacer.concurrency = g.concurrency;
    opts.push(optionsOf(g.concurrency > 0));
  }
  type Event =
    | {
        t: number;
        kind: 'arrive';
        host: number;
        key: string;
        customer: string;
        since: number;
        waited: boolean;
      }
    | { t: number; kind: 'end'; host: number }
    | { t: number; kind: 'wake'; host: number };
  const events: Event[] = [];
  const push = (e: Event) => {
    const i = events.findIndex((x) => x.t > e.t);
    if (i < 0) events.push(e);
    else events.splice(i, 0, e);
  };
  const anyHost = () => Math.floor(random() * hosts);
  const sim: Sim = { starts: [], waits: 0, requests: arrivals.length };
  const t0 = 10_000;
  arrivals.forEach((a, i) =>
    push({
      t: t0 + a.at,
      kind: 'arrive',
      host: anyHost(),
      key: `r${i}`,
      customer: a.customer,
      since: t0 + a.at,
      waited: false,
    }),
  );
  const begin = (host: number, at: number, e: { key: string; customer: string; since: number }) => {
    const end = at + 300 + random() * 100;
    sim.starts.push({ at, end, key: e.key, customer: e.customer, since: e.since });
    push({ t: end, kind: 'end', host });
  };
  const back = (e: { key: string; customer: string; since: number }, at: number) => {
    sim.waits += 1;
    push({
      key: e.key,
      customer: e.customer,
      since: e.since,
      t: at + random() * 150,
      kind: 'arrive',
      host: anyHost(),
      waited: true,
    });
  };
  const pump = (host: number, now: number) => {
    const r = pumpLine(desks[host], now, opts[host]);
    for (const e of r.start) begin(host, now, e);
    for (const s of r.sentBack) back(s.entry, s.wait.at);
    if (r.wakeAt !== undefined) push({ t: r.wakeAt, kind: 'wake', host });
  };
  for (let n = 0; n < 200_000 && events.length > 0; n++) {
    const e = events.shift()!;
    const desk = desks[e.host];
    if (e.kind === 'arrive') {
      const r = offer(desk, e, e.t, opts[e.host]);
      if (r.decision.kind === 'start') begin(e.host, e.t + (r.decision.delayMs ?? 0), e);
      else if (r.decision.kind === 'wait') back(e, r.decision.at);
      else pump(e.host, e.t);
      if (r.sentBack) back(r.sentBack.entry, r.sentBack.wait.at);
    } else {
      if (e.kind === 'end') release(desk.pacer);
      pump(e.host, e.t);
    }
  }
  return sim;
}

function throughput(sim: Sim): number {
  const at = sim.starts.map((s) => s.at).sort((a, b) => a - b);
  return ((at.length - 1) * 1000) / (at[at.length - 1] - at[0]);
}

function busiestWindow(sim: Sim): number {
  const at = sim.starts.map((s) => s.at).sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < at.length; i++) {
    while (at[i] - at[j] >= 1000) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

function mostAtOnce(sim: Sim): number {
  const ev = sim.starts.flatMap((s) => [
    { t: s.at, d: 1 },
    { t: s.end, d: -1 },
  ]);
  ev.sort((a, b) => a.t - b.t || a.d - b.d);
  let now = 0;
  let peak = 0;
  for (const e of ev) peak = Math.max(peak, (now += e.d));
  return peak;
}

const backlog = (n: number, customers: number) =>
  Array.from({ length: n }, (_, i) => ({ at: i * 20, customer: `c${i % customers}` }));

describe('call line: instances sharing a limit keep it busy', () => {
  for (const [rate, concurrent, hosts, orders] of [
    [5, 2, 4, 120],
    [20, 8, 4, 240],
  ]) {
    it(`${hosts} instances, ${rate}/s and ${concurrent} at once, a backlog of ${orders}: at least 90 % of the limit, within it, bounded round trips`, () => {
      const limits = { maxCallsPerSecond: rate, maxConcurrentCalls: concurrent };
      for (const seed of [1, 2, 3]) {
        const sim = simulate(limits, hosts, backlog(orders, 20), seed);
        const figures = `seed ${seed}: ${sim.starts.length} started, ${throughput(sim).toFixed(2)}/s, busiest window ${busiestWindow(sim)}, most at once ${mostAtOnce(sim)}, ${(sim.waits / orders).toFixed(2)} waits per request`;
        assert.equal(sim.starts.length, orders, figures);
        assert.ok(busiestWindow(sim) <= rate, figures);
        assert.ok(mostAtOnce(sim) <= concurrent, figures);
        assert.ok(throughput(sim) >= 0.9 * rate, figures);
        // Random delivery: half the returns land where no slot is (5/s, 2 at once, 4 instances).
        assert.ok(sim.waits / orders <= 4, figures);
      }
    });
  }
});

describe('call line: oldest first', () => {
  it('a request refused before takes its place ahead of newer ones, and starts first', () => {
    const d = newDesk();
    d.pacer.rate = 2;
    d.pacer.concurrency = 1;
    assert.equal(
      offer(d, { key: 'a', customer: 'a', since: 900, waited: false }, 1_000, options).decision.kind,
      'start',
    );
    // The line holds what starts within the hold time: two at 2/s.
    assert.equal(
      offer(d, { key: 'y', customer: 'y', since: 990, waited: false }, 1_010, options).decision.kind,
      'hold',
    );
    assert.equal(
      offer(d, { key: 'z', customer: 'z', since: 995, waited: false }, 1_020, options).decision.kind,
      'hold',
    );
    const newest = offer(d, { key: 'n', customer: 'n', since: 1_000, waited: false }, 1_030, options);
    assert.equal(newest.decision.kind, 'wait', 'a newer one goes back when the line is full');
    const old = offer(d, { key: 'x', customer: 'x', since: 0, waited: true }, 1_040, options);
    assert.equal(old.decision.kind, 'hold', 'the old one stays');
    assert.equal(old.sentBack?.entry.key, 'z', 'the youngest goes back in its place');
    release(d.pacer);
    assert.deepEqual(
      pumpLine(d, 1_400, options).start.map((e) => e.key),
      ['x'],
    );
  });

  it("one customer's burst takes at most its share of the starts while others wait", () => {
    const d = newDesk();
    d.recent = ['burst', 'burst', 'burst', 'other'];
    d.line = [
      { key: 'b1', customer: 'burst', since: 0, heldAt: 0 },
      { key: 'o1', customer: 'other', since: 5, heldAt: 0 },
    ];
    assert.equal(nextTurn(d, 0.5), 1);
    d.recent = ['burst', 'other'];
    assert.equal(nextTurn(d, 0.5), 0);
  });

  it('across instances, age order holds within about two round trips (not the length of the backlog)', () => {
    const sim = simulate({ maxCallsPerSecond: 5, maxConcurrentCalls: 2 }, 4, backlog(120, 20), 7);
    const order = [...sim.starts].sort((a, b) => a.at - b.at);
    // How long after younger ones did each request start: bounded, not the length of the backlog.
    let worst = 0;
    for (let i = 0; i < order.length; i++)
      for (let j = 0; j < i; j++)
        if (order[j].since > order[i].since) worst = Math.max(worst, order[j].since - order[i].since);
    assert.ok(worst <= 3_000, `a request started after one enqueued ${worst} ms after it`);
  });
});

describe('call line: a burst from one customer', () => {
  const p95 = (xs: number[]) =>
    [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.95))];
  const othersWait = (sim: Sim) =>
    p95(sim.starts.filter((s) => s.customer.startsWith('other')).map((s) => s.at - s.since));
  const others = (at: number) =>
    Array.from({ length: 10 }, (_, i) => ({ at: at + i * 5, customer: `other-${i}` }));

  it("60 orders of one customer, 10 of others 1 s later: at the default share, the others' p95 wait for a slot within 2x of alone (plus a call's spacing)", () => {
    const limits = { maxCallsPerSecond: 5, maxConcurrentCalls: 2 };
    const burst = Array.from({ length: 60 }, (_, i) => ({ at: i * 5, customer: 'burst' }));
    const runs = [1, 2, 3, 4, 5].map((seed) => {
      const alone = othersWait(simulate(limits, 4, others(0), seed, defaultCustomerShare));
      const mixed = simulate(limits, 4, [...burst, ...others(1_000)], seed, defaultCustomerShare);
      const figures = `seed ${seed}: others' p95 wait ${othersWait(mixed).toFixed(0)} ms with the burst, ${alone.toFixed(0)} ms alone, ${(mixed.waits / 70).toFixed(2)} waits per request`;
      return { ok: mixed.starts.length === 70 && othersWait(mixed) <= 2 * alone + 200, figures };
    });
    const figures = runs.map((r) => r.figures).join('; ');
    assert.ok(
      runs.every((r) => r.ok),
      figures,
    );
  });
});
