/**
 * A remote service's global call budget: how many calls per second and how many at once every
 * instance together may make, and how it is shared. Each instance holds a grant (a share of the
 * rate and of the concurrency) in one lease row per service and renews it every few seconds. The
 * rules here keep the sum of the live grants within the limit at every write (an instance only
 * takes headroom nobody else holds; it gives back at once), adapt the rate to the service's 429s
 * (AIMD), and pace one instance's calls inside its grant. No I/O: the lease adapter
 * (shared/agents/callBudget.ts) loads, decides here and writes with the row's ETag.
 */

/** Declared per Agent (and overridable per service by settings). Absent: no limit of that kind. */
export interface CallLimits {
  /** Calls started per second across all instances together. */
  readonly maxCallsPerSecond?: number;
  /** Calls in flight at once across all instances together. */
  readonly maxConcurrentCalls?: number;
}

/** One instance's share, as recorded in the service's lease row. */
export interface BudgetGrant {
  instance: string;
  /** Calls per second this instance may start. */
  rate: number;
  /** Calls this instance may have in flight. */
  concurrency: number;
  /** What it asked for at its last renewal (calls/s, calls at once). */
  wantRate: number;
  wantConcurrency: number;
  /** Epoch ms: after this (plus the grace) the grant is free for others. */
  expiresAt: number;
  /** A rate given back still counts until `heldUntil` (one window). */
  heldRate?: number;
  heldUntil?: number;
  /** Calls per second one of its slots starts, from its want (see Want.slotRate). */
  slotRate?: number;
}

/** The window a rate limit is counted over. */
export const rateWindowMs = 1_000;

function heldRateOf(g: BudgetGrant, now: number): number {
  return g.heldUntil !== undefined && g.heldUntil > now ? Math.max(g.rate, g.heldRate ?? 0) : g.rate;
}

/** The lease row's content: the grants and the service's pushback. */
export interface BudgetRow {
  grants: BudgetGrant[];
  /** Epoch ms: no instance starts a call before this (a 429/503's Retry-After). */
  pausedUntil: number;
  /** The fraction of the declared rate in force (AIMD): 1 while the service accepts. */
  rateFactor: number;
  /** Epoch ms of the last refusal and of the last additive increase. */
  refusedAt: number;
  raisedAt: number;
  /** 429/503 pauses so far (for the console). */
  pauses: number;
}

export const emptyBudgetRow: Readonly<BudgetRow> = Object.freeze({
  grants: [],
  pausedUntil: 0,
  rateFactor: 1,
  refusedAt: 0,
  raisedAt: 0,
  pauses: 0,
});

/** AIMD: halve on a refusal, add this fraction of the declared rate per lease period after. */
export const aimd = Object.freeze({ decrease: 0.5, increase: 0.1, floor: 0.05 });

/**
 * A grant stays reserved this long past its expiry: an instance whose clock runs behind the
 * writer's must have stopped using it before anyone else takes it.
 */
export const grantGraceMs = 2_000;

export function isLimited(limits: CallLimits): boolean {
  return limits.maxCallsPerSecond !== undefined || limits.maxConcurrentCalls !== undefined;
}

/** The rate in force now: the declared one times the AIMD factor; 0 while paused. */
export function rateInForce(limits: CallLimits, row: BudgetRow, now: number): number {
  if (now < row.pausedUntil) return 0;
  return limits.maxCallsPerSecond === undefined
    ? Number.POSITIVE_INFINITY
    : limits.maxCallsPerSecond * row.rateFactor;
}

/**
 * Max-min fair shares of `capacity` for `wants` (in order), with what nobody wants spread evenly
 * so a growing instance finds room. The shares sum to `capacity` (when there is anyone).
 */
export function fairShares(capacity: number, wants: readonly number[]): number[] {
  const n = wants.length;
  if (n === 0) return [];
  if (!Number.isFinite(capacity)) return wants.map(() => capacity);
  const clean = wants.map((w) => (Number.isFinite(w) && w > 0 ? w : 0));
  const shares = new Array<number>(n).fill(0);
  let left = capacity;
  let open = clean.map((_, i) => i);
  // Water-filling: give everyone an equal level; those who want less keep only what they want.
  while (open.length > 0 && left > 1e-9) {
    const level = left / open.length;
    const satisfied = open.filter((i) => clean[i] - shares[i] <= level);
    if (satisfied.length === 0) {
      for (const i of open) shares[i] += level;
      left = 0;
      break;
    }
    for (const i of satisfied) {
      left -= clean[i] - shares[i];
      shares[i] = clean[i];
    }
    open = open.filter((i) => !satisfied.includes(i));
  }
  if (left > 1e-9) for (let i = 0; i < n; i++) shares[i] += left / n;
  return shares;
}

/**
 * Integer fair shares (concurrency slots, whole calls a second): floors, then the remainders to
 * the largest fractions, first among those with room for one more within their want. The odd
 * call of 20 over three one-slot instances (3.26/s each) and one of five slots went to a
 * one-slot instance, which could not start it (staged bench: 4/s granted, 2.9 started).
 */
export function integerShares(capacity: number, wants: readonly number[]): number[] {
  if (!Number.isFinite(capacity)) return wants.map(() => capacity);
  const exact = fairShares(capacity, wants);
  const floors = exact.map((x) => Math.floor(x + 1e-9));
  let spare = Math.round(capacity) - floors.reduce((a, b) => a + b, 0);
  const room = (i: number) => (floors[i] + 1 <= wants[i] + 1e-9 ? 1 : 0);
  // One call at a time: one given a call may still have room for the next.
  for (; spare > 0 && floors.length > 0; spare--) {
    let best = 0;
    for (let i = 1; i < floors.length; i++) {
      const d = room(i) - room(best) || exact[i] - floors[i] - (exact[best] - floors[best]);
      if (d > 0) best = i;
    }
    floors[best] += 1;
  }
  return floors;
}

/**
 * integerShares among those that ask for any (the spare spread over them only): an instance that
 * wants none stands aside (pull mode), and slots spread to it sat idle with no rate (staged bench:
 * 4 of 8 slots for 5 s while the one instance calling held 4).
 */
function askersShares(capacity: number, wants: readonly number[]): number[] {
  if (!Number.isFinite(capacity)) return integerShares(capacity, wants);
  const asking = wants.map((w, i) => ({ w, i })).filter((x) => x.w > 0);
  const shares = integerShares(
    capacity,
    asking.map((x) => x.w),
  );
  const out = wants.map(() => 0);
  asking.forEach((x, k) => (out[x.i] = shares[k]));
  return out;
}

export interface Want {
  /** Calls per second this instance would start if it could. */
  rate: number;
  /** Calls it would have in flight at once. */
  concurrency: number;
  /** Calls it has in flight now (on slots of its previous grant). */
  inFlight?: number;
  /**
   * Calls per second one of its slots starts (1 s over its typical call): it is granted no more
   * rate than its slots carry. Absent: no such cap.
   */
  slotRate?: number;
  /**
   * Pull mode: the slots it holds it keeps, up to its want, rather than cut them to its fair share.
   * Where a slot sits does not decide which requests it serves (every slot pulls the oldest), and a
   * slot moved is idle a window or two on its way: a holder cut from 6 slots to 5 as another was
   * owed a third left that slot and 4 calls/s unused for 4 s (staged bench, default lease).
   */
  keepsHeld?: boolean;
}

/** The rate `slots` carry at `slotRate` each, or `rate` if less (no cap when either is unknown). */
function carried(rate: number, slots: number, slotRate: number | undefined): number {
  if (!(slotRate !== undefined && slotRate > 0) || !Number.isFinite(slots)) return rate;
  return Math.min(rate, slots * slotRate);
}

/**
 * The other instances' grants in `row` that still count at `now`: to their expiry plus the grace
 * (a holder's renewal may be on the way).
 */
function othersLive(row: BudgetRow, instance: string, now: number): BudgetGrant[] {
  return row.grants.filter((g) => g.instance !== instance && g.expiresAt + grantGraceMs > now);
}

/**
 * Pull mode: whether the other instances' live grants in `row` hold every slot or all the rate in
 * force (with a slot and rate each): then an instance without a slot has nothing to ask for. With
 * capacity free it asks: a holder on a long lease cut to its own want would leave the rest idle.
 * Held as long as renewGrant counts them (seeing a holder's grant just expired while its renewal
 * was on the way, three instances asked for slots at once).
 */
export function othersHoldAll(row: BudgetRow, instance: string, limits: CallLimits, now: number): boolean {
  const live = othersLive(row, instance, now);
  if (!live.some((g) => g.concurrency > 0 && g.rate > 0)) return false;
  const slots = live.reduce((n, g) => n + (g.concurrency ?? 0), 0);
  const rate = live.reduce((n, g) => n + g.rate, 0);
  const rateCap = rateInForce(limits, row, now);
  return (
    (limits.maxConcurrentCalls !== undefined && slots >= limits.maxConcurrentCalls) ||
    (Number.isFinite(rateCap) && rate >= Math.floor(rateCap + 1e-9))
  );
}

/**
 * Pull mode, standing aside: when the other instances' grants that hold slots or rate could next
 * lapse (their expiry plus the grace), the earliest a renewal could find capacity free; undefined
 * when nobody else holds any.
 */
export function holdersLapseAt(row: BudgetRow, instance: string, now: number): number | undefined {
  const holders = othersLive(row, instance, now).filter((g) => g.concurrency > 0 || g.rate > 0);
  return holders.length === 0 ? undefined : Math.min(...holders.map((g) => g.expiresAt + grantGraceMs));
}

/**
 * When rate another instance gave back stops being held (the earliest end of a hold above what
 * its grant now has), or undefined: an instance owed rate finds it free from then on.
 */
export function heldRateFreesAt(row: BudgetRow, instance: string, now: number): number | undefined {
  const ends = othersLive(row, instance, now)
    .filter((g) => g.heldUntil !== undefined && g.heldUntil > now && (g.heldRate ?? 0) > g.rate)
    .map((g) => g.heldUntil as number);
  return ends.length === 0 ? undefined : Math.min(...ends);
}

/**
 * The row after `instance` renews its grant at `now`. Grants past expiry plus the grace are
 * dropped; the instance's fair target follows from everyone's wants, but it takes only what the
 * others do not hold right now, so the live grants never sum above the limits. Giving back is
 * immediate; the others take it at their own next renewal (`owed`: this one got less than its
 * fair share, so renewing soon may take more).
 */
export function renewGrant(
  row: BudgetRow,
  instance: string,
  want: Want,
  limits: CallLimits,
  now: number,
  leaseMs: number,
): { row: BudgetRow; grant: BudgetGrant; owed: boolean } {
  const adapted = raiseRate(row, now, leaseMs);
  const live = othersLive(adapted, instance, now);
  const rateCap = rateInForceIgnoringPause(limits, adapted);
  const concCap = limits.maxConcurrentCalls ?? Number.POSITIVE_INFINITY;
  const previous = adapted.grants.find((g) => g.instance === instance && g.expiresAt + grantGraceMs > now);
  const keep = Math.min(
    want.keepsHeld ? Math.max(want.concurrency, want.inFlight ?? 0) : (want.inFlight ?? 0),
    previous?.concurrency ?? 0,
  );
  // The renewing instance first: whole shares break ties towards it, so with fewer slots than
  // instances the slots go to whoever asks while they are free (last would leave them all idle).
  // Then those holding slots: they keep them rather than every renewer moving them around.
  const others = [...live.filter((g) => g.concurrency > 0), ...live.filter((g) => !(g.concurrency > 0))];
  const concTargets = askersShares(concCap, [want.concurrency, ...others.map((g) => g.wantConcurrency)]);
  const concTarget = concTargets[0];
  const heldConc = live.reduce((a, g) => a + g.concurrency, 0);
  // Never below the calls still in flight on a slot it held: others could take the slot while
  // those calls run and the service would see more at once than it allows.
  const concurrency = Number.isFinite(concCap)
    ? Math.max(0, Math.min(Math.max(concTarget, keep), concCap - heldConc))
    : Number.POSITIVE_INFINITY;
  // Rate is shared only among instances that hold (or are due) a concurrency slot: a rate held
  // where no call can start is lost to the service (bench: 2 slots over 4 hosts left 2-3 of 5
  // calls/s unused). Nor more than those slots start: slots move only as calls end, and a holder
  // of 1 slot with 9/s beside one of 6 slots with 7/s left 7 of 20 calls/s unused (staged bench).
  // A slot due to an instance but held by another's call in flight is not its yet: only the free
  // ones count (staged bench: two instances due a slot each, none free, cut the holder of all 8
  // busy slots to 7/s).
  let free = Number.isFinite(concCap)
    ? Math.max(0, concCap - heldConc - concurrency)
    : Number.POSITIVE_INFINITY;
  const slotsOf = (g: BudgetGrant, target: number) => {
    if (!Number.isFinite(free)) return Math.max(g.concurrency, target);
    const more = Math.min(Math.max(0, target - g.concurrency), free);
    free -= more;
    return g.concurrency + more;
  };
  // One that has not timed its calls yet is taken to carry what another instance's slots do (the
  // same service), itself included: uncapped, a newcomer holding 5/s on 1 slot (3/s) kept that
  // rate from the holder of 6 slots at 10/s for 2 s (staged bench, default lease).
  const sameService = want.slotRate ?? live.find((g) => g.slotRate !== undefined)?.slotRate;
  const callers = others
    .map((g, i) => ({ instance: g.instance, slots: slotsOf(g, concTargets[i + 1]), g }))
    .filter((c) => c.slots > 0)
    // Uncapped, a newcomer with 1 slot got 10/s beside the holder of 7 busy slots.
    .map((c) => ({
      instance: c.instance,
      wantRate: carried(c.g.wantRate, c.slots, c.g.slotRate ?? sameService),
    }));
  const canCall = concurrency > 0;
  const mine = { instance, wantRate: canCall ? carried(want.rate, concurrency, sameService) : 0 };
  const everyone = [mine, ...callers];
  const wholeRates = Number.isFinite(rateCap) && rateCap >= everyone.length;
  // Whole shares' odd calls go by instance name, the same whoever renews: renewer-first let each
  // renewer keep the odd call, leaving another instance with slots and no rate (2, 2, 1, 0 of 5).
  const byName = [...everyone].sort((a, b) =>
    a.instance < b.instance ? -1 : a.instance > b.instance ? 1 : 0,
  );
  const rateTarget = canCall
    ? wholeRates
      ? integerShares(
          Math.floor(rateCap + 1e-9),
          byName.map((g) => g.wantRate),
        )[byName.findIndex((g) => g.instance === instance)]
      : fairShares(
          rateCap,
          everyone.map((g) => g.wantRate),
        )[0]
    : 0;
  // Rate given back stays counted for one window after: calls started under it are still in
  // the service's last second, and a taker starting at once would put that second over the limit.
  const heldRate = live.reduce((a, g) => a + heldRateOf(g, now), 0);
  // Whole calls per second when the rate allows one each: a fractional share lets each instance's
  // paced starts round up within a window, and the rounding adds up across instances.
  const whole = (x: number) => (wholeRates ? Math.floor(x + 1e-9) : x);
  const rate = Math.max(0, whole(Math.min(rateTarget, rateCap - heldRate)));
  const grant: BudgetGrant = {
    instance,
    rate,
    concurrency,
    wantRate: want.rate,
    wantConcurrency: want.concurrency,
    expiresAt: now + leaseMs,
    ...(want.slotRate !== undefined ? { slotRate: want.slotRate } : {}),
  };
  // Held from when the rate dropped, not from each renewal after it: renewals less than a window
  // apart re-held it for good (4 instances at 20/s: 8 calls/s never free again).
  if (previous && rate < previous.rate) {
    grant.heldRate = heldRateOf(previous, now);
    grant.heldUntil = now + rateWindowMs;
  } else if (previous?.heldUntil !== undefined && previous.heldUntil > now) {
    grant.heldRate = previous.heldRate;
    grant.heldUntil = previous.heldUntil;
  }
  // Its fair share is more than it got: others hold the rest (above their own shares, or rate
  // given back and held for a window), and it comes free at their renewals, not at this one.
  const owed =
    (Number.isFinite(concCap) && concTarget > concurrency) ||
    (canCall && Number.isFinite(rateTarget) && rateTarget - rate >= 1 - 1e-9);
  return { row: { ...adapted, grants: [...live, grant] }, grant, owed };
}

/**
 * Calls an instance makes per renewal once it calls often enough: renewals then cost 2/this table
 * transactions per call whatever the instance count (a fixed period costs I/P per second, which
 * grows with the instances sharing a fixed order rate).
 */
export const callsPerRenewal = 50;

/** How long to wait before the next renewal (or read) at this instance's call rate. */
export function renewalIntervalMs(startedPerSecond: number, minMs: number, maxMs: number): number {
  if (!(startedPerSecond > 0)) return Math.max(minMs, maxMs);
  return Math.min(Math.max(minMs, maxMs), Math.max(minMs, (callsPerRenewal * 1000) / startedPerSecond));
}

/**
 * How long after a renewal landed a holder renews next: `everyMs` (a lease), unless a renewal as
 * slow as the recent ones (`tookMs`, from its start until it landed) would then land later than
 * `slackMs` past the grant's expiry; then early enough that it lands by then, but never sooner
 * than half a lease after the last (a slow table costs at most twice the renewals). Renewed a
 * lease after the last landed, a renewal slower than the renewing grace let the grant lapse every
 * time (staged bench on a loaded Azurite: 1.5-3 s renewals). Where the table answers in
 * milliseconds nothing changes, on purpose: renewals less than a rate window apart would re-hold
 * a rate that drops at each (`heldRate`) and keep it from the others.
 */
export function renewAheadMs(
  expiresAt: number,
  now: number,
  tookMs: number,
  leaseMs: number,
  everyMs: number,
  slackMs: number,
): number {
  return Math.min(everyMs, Math.max(leaseMs / 2, expiresAt + slackMs - now - tookMs));
}

/** Wants more than it holds: rebalancing may give it more, so renewals stay at the shortest lease. */
function isShort(g: Pick<BudgetGrant, 'rate' | 'concurrency' | 'wantRate' | 'wantConcurrency'>): boolean {
  return g.wantRate > g.rate + 1e-9 || g.wantConcurrency > g.concurrency;
}

/**
 * renewGrant with a lease that follows demand: while every live grant covers what its instance
 * wants, the grant (cut to what it wants) lasts `callsPerRenewal` of this instance's calls
 * (between `minMs` and `maxMs`); an instance that finds itself short renews early (the adapter);
 * while anyone wants more than it holds (the limit binds) or requests wait, `minMs`, so shares
 * rebalance within one short lease.
 */
export function renewGrantFor(
  row: BudgetRow,
  instance: string,
  want: Want,
  limits: CallLimits,
  now: number,
  lease: { minMs: number; maxMs: number; startedPerSecond: number; waiting?: boolean },
): { row: BudgetRow; grant: BudgetGrant; owed: boolean; leaseMs: number } {
  const r = renewGrant(row, instance, want, limits, now, lease.minMs);
  const anyShort = r.row.grants.some((g) => g.expiresAt + grantGraceMs > now && isShort(g));
  // Requests waiting in the service's queue are demand no want shows (in pull mode the instances
  // they reached stand aside): a long lease cut to the holder's want would strand the rest.
  const leaseMs =
    anyShort || lease.waiting
      ? lease.minMs
      : renewalIntervalMs(lease.startedPerSecond, lease.minMs, lease.maxMs);
  if (leaseMs === lease.minMs) return { ...r, leaseMs };
  // A long lease holds only what the instance wants: spare capacity held for a minute would be
  // stranded from an instance that starts calling meanwhile (it renews at the short lease).
  const grant: BudgetGrant = {
    ...r.grant,
    rate: Math.min(r.grant.rate, Math.ceil(want.rate - 1e-9)),
    concurrency: Math.min(r.grant.concurrency, Math.max(want.concurrency, want.inFlight ?? 0)),
    expiresAt: now + leaseMs,
  };
  const previous = row.grants.find((g) => g.instance === instance && g.expiresAt + grantGraceMs > now);
  const wasHeld = previous ? heldRateOf(previous, now) : 0;
  if (grant.rate < wasHeld && !(grant.heldUntil !== undefined && grant.heldUntil > now)) {
    grant.heldRate = wasHeld;
    grant.heldUntil = now + rateWindowMs;
  }
  return {
    row: { ...r.row, grants: r.row.grants.map((g) => (g.instance === instance ? grant : g)) },
    grant,
    owed: false,
    leaseMs,
  };
}

/** The declared rate times the AIMD factor (a pause is applied by the pacing, not the shares). */
function rateInForceIgnoringPause(limits: CallLimits, row: BudgetRow): number {
  return limits.maxCallsPerSecond === undefined
    ? Number.POSITIVE_INFINITY
    : limits.maxCallsPerSecond * row.rateFactor;
}

/** Additive increase: one step per lease period without a refusal, up to the declared rate. */
export function raiseRate(row: BudgetRow, now: number, leaseMs: number): BudgetRow {
  if (row.rateFactor >= 1) return row;
  const quiet = now - Math.max(row.refusedAt, row.raisedAt, row.pausedUntil);
  if (quiet < leaseMs) return row;
  return { ...row, rateFactor: Math.min(1, row.rateFactor + aimd.increase), raisedAt: now };
}

/**
 * A 429/503 from the service: every instance pauses until its Retry-After (at least `minPauseMs`),
 * and the rate in force halves, once per pause (refusals from calls started before the pause
 * began are the same pushback, not more of it). Each grant shrinks in proportion at once, so the
 * sum stays within the lowered rate without waiting for renewals.
 */
export function afterRefusal(
  row: BudgetRow,
  now: number,
  retryAfterMs: number | undefined,
  minPauseMs: number,
): BudgetRow {
  const until = now + Math.max(minPauseMs, retryAfterMs ?? 0);
  const fresh = now >= row.pausedUntil;
  const factor = fresh ? Math.max(aimd.floor, row.rateFactor * aimd.decrease) : row.rateFactor;
  const scale = row.rateFactor > 0 ? factor / row.rateFactor : 1;
  return {
    ...row,
    grants: row.grants.map((g) => ({ ...g, rate: g.rate * scale })),
    pausedUntil: Math.max(row.pausedUntil, until),
    rateFactor: factor,
    refusedAt: now,
    pauses: row.pauses + (fresh ? 1 : 0),
  };
}

/**
 * One instance's pacing inside its grant, and its book of reserved start times for the requests
 * it sent back to the queue. Starts are counted in a sliding window (at most the whole calls per
 * second of the grant in any 1 s), not spaced from the last start: a woken request arrives a
 * little after its slot (the broker delivers scheduled messages late by up to ~150 ms here), and
 * spacing from the last start pushed every later slot back by that lateness. Requests that waited
 * go first; a fresh request leaves the slots due now to those booked; one customer books at most
 * every 1/share-th slot, so others book between its bookings.
 */
export interface Pacer {
  rate: number;
  concurrency: number;
  pausedUntil: number;
  /** Calls this instance has in flight. */
  inFlight: number;
  /** Start times (epoch ms, ascending) still inside the rate window. */
  starts: number[];
  /**
   * Reserved start times (epoch ms, ascending) with the customer each was reserved for. A soft one
   * fills a slot nobody else booked for a customer past its share; another customer may book it.
   */
  book: Array<{ at: number; customer: string; soft?: boolean }>;
  /**
   * The service counts a start when the request reaches it, the pacer when it decides: the event
   * loop and the network put up to this much between the two, unevenly, so starts are counted over
   * 1 s plus this (bench: starts one window apart at the gate landed 6 in a 1 s window at 5/s).
   */
  marginMs?: number;
}

export function newPacer(): Pacer {
  return { rate: 0, concurrency: 0, pausedUntil: 0, inFlight: 0, starts: [], book: [] };
}

export interface CallRequest {
  /** The order's customer: the share rule's unit. */
  customer: string;
  /** The request already waited for a slot (it carries its reservation): it goes before fresh ones. */
  waited: boolean;
}

export type CallAdmission =
  /** Call now, or after `delayMs` (a moment before its paced slot). */
  | { kind: 'start'; delayMs?: number }
  /** Send the request back to the queue, to be read again at `at` (epoch ms). */
  | {
      kind: 'wait';
      at: number;
      reason: 'paused' | 'rate' | 'concurrency' | 'no-grant' | 'share';
      /** Pull mode: when it is expected to start, behind the requests waiting before it. */
      startBy?: number;
    };

export interface PacingOptions {
  /** The most of the rate one customer's waiting requests take while others wait (0..1]. */
  customerShare: number;
  /** How long a call is expected to take (a concurrency slot frees after it). */
  callMs: number;
  /** When a grant of 0 may change (the next renewal). */
  leaseMs: number;
  /** How far ahead slots are booked: one customer holds at most its share of them. */
  horizonMs: number;
  /** A start due this soon (at most a quarter of the spacing) waits in place instead of re-queueing. */
  maxHoldMs?: number;
  /**
   * The spacing of the slots booked for requests sent back, when not this pacer's own: a request
   * comes back to any instance, so the returns are paced for the instances holding slots.
   */
  returnSpacingMs?: number;
}

/** Decides whether a request starts now; mutates the pacer (a start counts, a wait books a slot). */
export function admit(p: Pacer, request: CallRequest, now: number, options: PacingOptions): CallAdmission {
  const spacing = spacingOf(p);
  p.book = p.book.filter((b) => b.at > now - spacing);
  const window = windowOf(p.rate, p.marginMs);
  p.starts = p.starts.filter((s) => s > now - window.ms);
  if (now < p.pausedUntil) return reserve(p, request, p.pausedUntil, options, 'paused');
  if (p.rate <= 0 || p.concurrency <= 0)
    return reserve(p, request, now + options.leaseMs, options, 'no-grant');
  const free = window.count - p.starts.length;
  // A fresh request leaves the slots due by the next one to the requests booked for them.
  const kept = request.waited ? 0 : p.book.filter((b) => b.at < now + spacing).length;
  const freesAt = windowFreesAt(p, window, now);
  // A start due within a moment waits that moment in place (pacing, not waiting): a request woken
  // a few ms before its slot must not lose it to a round trip through the queue.
  const hold = Math.min(options.maxHoldMs ?? 0, spacing / 4);
  const startAt = free > kept ? now : kept === 0 && freesAt - now <= hold ? freesAt : undefined;
  if (startAt !== undefined && p.inFlight < p.concurrency) {
    if (request.waited) p.book = dropFirst(p.book, request.customer);
    p.starts.push(startAt);
    p.inFlight += 1;
    return startAt > now ? { kind: 'start', delayMs: startAt - now } : { kind: 'start' };
  }
  if (request.waited) p.book = dropFirst(p.book, request.customer);
  const reason = p.inFlight >= p.concurrency ? 'concurrency' : 'rate';
  const from = reason === 'concurrency' ? Math.max(now + options.callMs, freesAt) : freesAt;
  return reserve(p, request, from, options, reason);
}

/**
 * When this pacer could start one more call, without starting it: `now` or the time its rate
 * window admits one; undefined while paused, without a grant or with every slot in use.
 */
export function startableAt(p: Pacer, now: number): number | undefined {
  const window = windowOf(p.rate, p.marginMs);
  p.starts = p.starts.filter((s) => s > now - window.ms);
  p.book = p.book.filter((b) => b.at > now - spacingOf(p));
  if (now < p.pausedUntil || !(p.rate > 0) || !(p.concurrency > 0) || p.inFlight >= p.concurrency)
    return undefined;
  return windowFreesAt(p, window, now);
}

/** A call starts at `at` (checked by startableAt): it counts in the window and holds a slot. */
export function recordStart(p: Pacer, at: number): void {
  p.starts.push(at);
  p.inFlight += 1;
}

/**
 * A slot claimed for a request still to be read from the waiting queue (issue 26, the slot pulls
 * its next request): the start counts from when the request is in hand (`to`), or not at all when
 * none came (`to` undefined). Moving a counted start later never lets the window admit more: every
 * start admitted meanwhile was admitted with this one counted.
 */
export function restampStart(p: Pacer, from: number, to: number | undefined): void {
  const i = p.starts.lastIndexOf(from);
  if (i >= 0) p.starts.splice(i, 1);
  if (to === undefined) {
    p.inFlight = Math.max(0, p.inFlight - 1);
    return;
  }
  const j = p.starts.findIndex((s) => s > to);
  if (j < 0) p.starts.push(to);
  else p.starts.splice(j, 0, to);
}

/** How recently booked entries of the waiting queue count as a customer's pending requests. */
export const waitingRecentMs = 2_000;

/**
 * When a request this instance sends to the service's waiting queue falls due (pull mode, issue
 * 26). Slots take due requests oldest first, and a request due cannot be passed. A request is due
 * at once unless its customer holds its share or more of the requests waiting here: then it falls
 * due a step after the customer's previous one, `spacingMs` (all instances together: 1.1 x the
 * rate, so a customer alone still keeps every slot busy, and what arrives later from others is
 * not behind all of its requests), widened to the customer's share of the rate while another
 * customer's requests wait here too. `book` is this instance's recent bookings, oldest first.
 */
export function waitingDueAt(
  book: ReadonlyArray<{ at: number; customer: string }>,
  customer: string,
  now: number,
  o: { spacingMs: number; share: number },
): number {
  if (o.share >= 1) return now;
  const recent = book.filter((b) => b.at > now - waitingRecentMs);
  const own = recent.filter((b) => b.customer === customer);
  if (own.length === 0 || own.length < o.share * recent.length) return now;
  const othersWait = recent.some((b) => b.customer !== customer);
  const step = othersWait ? (o.spacingMs * 1.1) / o.share : o.spacingMs;
  return Math.max(now, own[own.length - 1].at + step);
}

/**
 * How far apart a customer's requests past its share fall due on one instance: all instances
 * together make them due at 1.1 x the rate (the slots never run dry on one customer alone).
 */
export function waitingSpacingMs(rate: number, instances: number): number | undefined {
  if (!(rate > 0) || !Number.isFinite(rate)) return undefined;
  return (1000 * Math.max(1, instances)) / (1.1 * rate);
}

/** Books a slot from `from` on for a request sent back to its queue (the share rule applies). */
export function bookSlot(
  p: Pacer,
  request: CallRequest,
  from: number,
  options: PacingOptions,
  reason: Exclude<CallAdmission, { kind: 'start' }>['reason'],
): Extract<CallAdmission, { kind: 'wait' }> {
  return reserve(p, request, from, options, reason) as Extract<CallAdmission, { kind: 'wait' }>;
}

/** A call ended: its concurrency slot is free. */
export function release(p: Pacer): void {
  p.inFlight = Math.max(0, p.inFlight - 1);
}

/**
 * The rate as a sliding window: whole calls per second in any 1 s; below one call per second, one
 * call per 1/rate. Never more than the grant in any 1 s window, whatever the arrivals.
 */
function windowOf(rate: number, marginMs = 0): { count: number; ms: number } {
  if (!(rate > 0)) return { count: 0, ms: rateWindowMs };
  if (!Number.isFinite(rate)) return { count: Number.POSITIVE_INFINITY, ms: rateWindowMs };
  return rate >= 1
    ? { count: Math.floor(rate + 1e-9), ms: rateWindowMs + marginMs }
    : { count: 1, ms: rateWindowMs / rate + marginMs };
}

/** When the window admits one more start (`now` when it already does). */
function windowFreesAt(p: Pacer, window: { count: number; ms: number }, now: number): number {
  if (p.starts.length < window.count) return now;
  return Math.max(now, p.starts[p.starts.length - window.count] + window.ms);
}

function spacingOf(p: Pacer): number {
  return p.rate > 0 && Number.isFinite(p.rate) ? 1000 / p.rate : 0;
}

function dropFirst(book: Pacer['book'], customer: string): Pacer['book'] {
  const i = book.findIndex((b) => b.customer === customer);
  return i < 0 ? book : [...book.slice(0, i), ...book.slice(i + 1)];
}

/** The first time from `from` on at least half a spacing away from every booking in `book`. */
function firstFreeSlot(book: Pacer['book'], from: number, spacing: number): number {
  let at = from;
  for (const b of book) {
    if (b.at < at - spacing / 2) continue;
    if (b.at < at + spacing / 2) at = b.at + spacing;
  }
  return at;
}

/**
 * Books a slot from `from` on. A customer's bookings are at least spacing/share apart, so others
 * book between them and wait at most about 1/(1 - share) times as long as without it; a slot
 * nobody booked before that is filled softly (the customer alone still gets the whole rate). One
 * customer holds at most its share of the booking horizon's slots: past that, its request is told
 * to come back when its own bookings are done, without a slot.
 */
function reserve(
  p: Pacer,
  request: CallRequest,
  from: number,
  options: PacingOptions,
  reason: Exclude<CallAdmission, { kind: 'start' }>['reason'],
): CallAdmission {
  const spacing = options.returnSpacingMs ?? (spacingOf(p) || 50);
  const share = options.customerShare;
  const own = p.book.filter((b) => b.customer === request.customer);
  const rate =
    options.returnSpacingMs === undefined && Number.isFinite(p.rate) && p.rate > 0 ? p.rate : 1000 / spacing;
  const maxAhead = Math.max(1, Math.ceil(share * rate * (options.horizonMs / 1000)));
  if (own.length >= maxAhead && share < 1) {
    return { kind: 'wait', at: Math.max(from, own[own.length - 1].at + spacing), reason: 'share' };
  }
  const lastFirm = own.filter((b) => !b.soft).at(-1);
  const firmFrom = share < 1 && lastFirm ? Math.max(from, lastFirm.at + spacing / share) : from;
  const firm = firstFreeSlot(
    p.book.filter((b) => !b.soft),
    firmFrom,
    spacing,
  );
  const gap = share < 1 ? firstFreeSlot(p.book, from, spacing) : firm;
  const soft = gap < firm;
  const entry = { at: soft ? gap : firm, customer: request.customer, ...(soft ? { soft } : {}) };
  const i = p.book.findIndex((b) => b.at > entry.at);
  if (i < 0) p.book.push(entry);
  else p.book.splice(i, 0, entry);
  return { kind: 'wait', at: entry.at, reason };
}

/**
 * What a slot holder asks for at its renewal: the calls it was asked for per second, with room to
 * grow, and slots for its peak plus the requests that waited for one. In pull mode, while requests
 * wait in the service's queue, also more than it holds: its pulls, and so its asks, are capped by
 * its grant, and asking only for them let a holder's share shrink while the queue was full. The
 * rate it asks for then is the whole rate in force: its slots cap what it is granted (renewGrant),
 * and one call a second more per renewal took 7 s to share 20/s between two holders.
 */
export function shareWanted(o: {
  askedPerSecond: number;
  peakInFlight: number;
  concurrencyWaits: number;
  waiting: boolean;
  holds: { rate: number; concurrency: number };
  /** The limit's rate in force (Infinity without a rate limit). */
  rateInForce: number;
}): { rate: number; concurrency: number } {
  const grow = (held: number) => (o.waiting ? held + 1 : 0);
  const whole = o.waiting && Number.isFinite(o.rateInForce) ? o.rateInForce : 0;
  return {
    rate: Math.max(1, o.askedPerSecond * 1.5, grow(o.holds.rate), whole),
    concurrency: Math.max(1, o.peakInFlight + o.concurrencyWaits, grow(o.holds.concurrency)),
  };
}
