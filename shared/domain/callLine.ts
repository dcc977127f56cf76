import {
  admit,
  bookSlot,
  newPacer,
  recordStart,
  startableAt,
  type CallAdmission,
  type PacingOptions,
  type Pacer,
} from './callBudget.js';

/**
 * One instance's desk for a limited service (issue 26): its pacer (the grant) and a short line of
 * requests waiting in place for a slot due within the hold time. A request sent back to its queue
 * comes back to any instance (competing consumers: 3 in 4 elsewhere with 4 instances), so a slot
 * booked here for it mostly went unused, and each round trip cost ~100 ms of broker lateness
 * (bench: 51 % of the limit, 3.95 waits per request). The line keeps every slot fed the moment it
 * frees; what does not fit goes back to its queue as before. The line is ordered by age (the
 * oldest order first); one customer holds at most its share of the line and of the starts while
 * others wait. No I/O: the gate (shared/agents/callBudget.ts) holds the invocations.
 */
export interface LineEntry {
  /** Unique per held invocation. */
  key: string;
  customer: string;
  /** Epoch ms: when the request was first enqueued (its age; kept across waits). */
  since: number;
  /** Epoch ms: when it joined the line. */
  heldAt: number;
}

export interface Desk {
  pacer: Pacer;
  /** Oldest first. */
  line: LineEntry[];
  /** Customers of the most recent starts, newest last (the share rule). */
  recent: string[];
}

export function newDesk(): Desk {
  return { pacer: newPacer(), line: [], recent: [] };
}

/**
 * The default most of a limited service one customer's waiting requests take while others wait
 * (CALL_BUDGET_CUSTOMER_SHARE). With share s, others who alone would fill the rate get 1 - s of it,
 * so their wait is at least 1 / (1 - s) of their wait alone: at 0.5 that is already issue 26's 2x
 * bound before any round trip (simulation: 1.9-2.5x at 0.5).
 */
export const defaultCustomerShare = 0.25;

export interface LineOptions extends PacingOptions {
  /** A request waits in place only for a start due within this (pacing, not waiting). */
  holdMs: number;
}

/**
 * How far apart this instance books the returns of the requests it sends back. Delivery is at
 * random, so only `holders / instances` of the returns land where a slot is; the returns must keep
 * those slots fed with 25 % to spare. An instance holding a slot sends back only its overflow and
 * books at its share of the rate; one without a slot sends back everything it gets, so those
 * instances together return 1.25 x rate x instances / holders per second (a request comes back
 * soon and most likely elsewhere). Undefined when no one holds a slot (wait for a grant).
 */
export function returnSpacingMs(
  rate: number,
  holders: number,
  instances: number,
  holdsSlot: boolean,
): number | undefined {
  if (!(holders > 0) || !(rate > 0) || !Number.isFinite(rate)) return undefined;
  const perSecond = holdsSlot
    ? (1.25 * rate) / holders
    : (1.25 * rate * Math.max(instances, holders + 1)) / holders / Math.max(1, instances - holders);
  return 1000 / perSecond;
}

export type Offer = CallAdmission | { kind: 'hold' };

export interface SentBack {
  entry: LineEntry;
  wait: Extract<CallAdmission, { kind: 'wait' }>;
}

/** Starts remembered for the share rule. */
const recentStarts = 10;

/**
 * How many may wait in place: the starts this grant makes within the hold time (so the next
 * request is at hand when a slot frees); none without a grant, while paused, or at a rate too slow
 * to start one within the hold time (the request goes back to its queue, as it always did).
 */
export function lineRoom(p: Pacer, now: number, o: LineOptions): number {
  if (now < p.pausedUntil || !(p.rate > 0) || !(p.concurrency > 0)) return 0;
  const perSecond = Math.min(p.rate, (p.concurrency * 1000) / Math.max(1, o.callMs));
  if (!Number.isFinite(perSecond)) return Number.POSITIVE_INFINITY;
  return Math.floor((perSecond * o.holdMs) / 1000);
}

/**
 * A request arrives at this desk: it starts now, waits in line, or goes back to its queue. When
 * the line is full the least entitled of the line and the newcomer goes back (a customer's
 * entries past its share first, then the youngest): an older request refused before takes its
 * place ahead of newer ones.
 */
export function offer(
  d: Desk,
  request: { key: string; customer: string; since: number; waited: boolean; mayHold?: boolean },
  now: number,
  o: LineOptions,
): { decision: Offer; sentBack?: SentBack } {
  const p = d.pacer;
  const at = startableAt(p, now);
  const room = lineRoom(p, now, o);
  // Without room (or too close to its complete-by to hold) the pacer alone decides, as before.
  if (room === 0 || request.mayHold === false) {
    // Without a grant while others hold slots: back soon, most likely to another instance.
    if (o.returnSpacingMs !== undefined && now >= p.pausedUntil && !(p.rate > 0 && p.concurrency > 0))
      return { decision: bookSlot(p, request, now + o.returnSpacingMs, o, 'no-grant') };
    const a = admit(p, { customer: request.customer, waited: request.waited }, now, o);
    if (a.kind === 'start') d.recent = [...d.recent, request.customer].slice(-recentStarts);
    return { decision: a };
  }
  if (d.line.length === 0 && at === now) {
    recordStart(p, now);
    d.recent = [...d.recent, request.customer].slice(-recentStarts);
    return { decision: { kind: 'start' } };
  }
  const entry: LineEntry = {
    key: request.key,
    customer: request.customer,
    since: request.since,
    heldAt: now,
  };
  const all = insertByAge(d.line, entry);
  if (all.length <= room) {
    d.line = all;
    return { decision: { kind: 'hold' } };
  }
  const victim = leastEntitled(all, room, o.customerShare);
  d.line = all.filter((e) => e !== victim);
  const wait = sendBackAt(d, victim, now, room, o);
  return victim === entry
    ? { decision: wait }
    : { decision: { kind: 'hold' }, sentBack: { entry: victim, wait } };
}

/**
 * After a call ends, a grant changes or a timer fires: which entries start now, which go back
 * (no grant any more, or held past twice the hold time), and when to look again.
 */
export function pumpLine(
  d: Desk,
  now: number,
  o: LineOptions,
): { start: LineEntry[]; sentBack: SentBack[]; wakeAt?: number } {
  const p = d.pacer;
  const start: LineEntry[] = [];
  const sentBack: SentBack[] = [];
  const room = lineRoom(p, now, o);
  const overstayed = (e: LineEntry) => room === 0 || e.heldAt + 2 * o.holdMs <= now;
  for (const e of d.line.filter(overstayed))
    sentBack.push({ entry: e, wait: sendBackAt(d, e, now, room, o) });
  d.line = d.line.filter((e) => !overstayed(e));
  let wakeAt: number | undefined;
  while (d.line.length > 0) {
    const at = startableAt(p, now);
    if (at === undefined) break;
    if (at > now) {
      wakeAt = at;
      break;
    }
    const i = nextTurn(d, o.customerShare);
    const [e] = d.line.splice(i, 1);
    recordStart(p, now);
    d.recent = [...d.recent, e.customer].slice(-recentStarts);
    start.push(e);
  }
  if (d.line.length > 0) {
    const due = Math.min(...d.line.map((e) => e.heldAt + 2 * o.holdMs));
    wakeAt = wakeAt === undefined ? due : Math.min(wakeAt, due);
  }
  return { start, sentBack, ...(wakeAt !== undefined ? { wakeAt } : {}) };
}

/** The oldest entry, unless its customer took its share of the recent starts and others wait. */
export function nextTurn(d: Desk, share: number): number {
  if (share >= 1) return 0;
  const took = (c: string) => d.recent.filter((r) => r === c).length / Math.max(1, d.recent.length);
  const othersWait = (c: string) => d.line.some((e) => e.customer !== c);
  const i = d.line.findIndex((e) => !othersWait(e.customer) || took(e.customer) < share);
  return Math.max(0, i);
}

function insertByAge(line: LineEntry[], entry: LineEntry): LineEntry[] {
  const i = line.findIndex((e) => e.since > entry.since || (e.since === entry.since && e.key > entry.key));
  return i < 0 ? [...line, entry] : [...line.slice(0, i), entry, ...line.slice(i)];
}

/** The entry to send back: past its customer's share of the line (when others wait) first, then the youngest. */
function leastEntitled(all: LineEntry[], room: number, share: number): LineEntry {
  const perCustomer = Math.max(1, Math.floor(share * room));
  const rank = new Map<LineEntry, number>();
  const seen = new Map<string, number>();
  for (const e of all) {
    const n = seen.get(e.customer) ?? 0;
    rank.set(e, n);
    seen.set(e.customer, n + 1);
  }
  const mixed = seen.size > 1 && share < 1;
  const over = (e: LineEntry) => (mixed && (rank.get(e) ?? 0) >= perCustomer ? 1 : 0);
  let victim = all[all.length - 1];
  for (const e of all)
    if (over(e) > over(victim) || (over(e) === over(victim) && e.since >= victim.since)) victim = e;
  return victim;
}

/** Back to the queue, booked for when the line ahead of it has started (or the grant may change). */
function sendBackAt(
  d: Desk,
  e: LineEntry,
  now: number,
  room: number,
  o: LineOptions,
): Extract<CallAdmission, { kind: 'wait' }> {
  const p = d.pacer;
  const request = { customer: e.customer, waited: true };
  if (now < p.pausedUntil) return bookSlot(p, request, p.pausedUntil, o, 'paused');
  if (room === 0) return bookSlot(p, request, now + o.leaseMs, o, 'no-grant');
  const reason = p.inFlight >= p.concurrency ? 'concurrency' : 'rate';
  if (o.returnSpacingMs !== undefined) return bookSlot(p, request, now + o.returnSpacingMs, o, reason);
  const drainMs =
    (1000 * d.line.length) / Math.max(1e-9, Math.min(p.rate, (p.concurrency * 1000) / o.callMs));
  return bookSlot(p, request, now + Math.min(drainMs, o.holdMs), o, reason);
}
