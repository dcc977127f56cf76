import {
  afterRefusal,
  isLimited,
  newDesk,
  offer,
  pumpLine,
  rateInForce,
  recordStart,
  release,
  restampStart,
  shareWanted,
  startableAt,
  waitingDueAt,
  waitingRecentMs,
  waitingSpacingMs,
  returnSpacingMs,
  renewalIntervalMs,
  renewAheadMs,
  renewGrantFor,
  type BudgetRow,
  type CallAdmission,
  type CallLimits,
  type Clock,
  type LineOptions,
  type Want,
  othersHoldAll,
  holdersLapseAt,
  heldRateFreesAt,
  rateWindowMs,
} from '../domain/index.js';
import type { Logger } from '../observability/logger.js';
import { acceptedStatus, PauseNews, pauseLookWaitMs, pauseNewsMaxAgeMs } from './pauseNews.js';
import { recordCallPause, recordCallWait, recordGate } from '../observability/callBudgetMetrics.js';
import type { CallBudgetTable, GrantReport, ReportedGrant } from '../stateStore/callBudgetTable.js';
import { traceCall, tracing } from './callTrace.js';
import type { PullAhead } from './pullAhead.js';

/**
 * One process's side of a remote service's global call budget (issue 26): it leases a share of the
 * service's limits through the service's lease row, renewing every lease period while it has calls
 * to make, and paces its own calls inside that share (shared/domain/callBudget.ts decides). A
 * 429/503 pauses this process at once and, through the row, every other at its next renewal.
 * When the row cannot be renewed the share lapses at its expiry and calls wait: the limit holds.
 */
export interface CallGateOptions {
  service: string;
  limits: CallLimits;
  /** This process's name in the lease row. */
  instance: string;
  /** The shortest lease (CALL_BUDGET_LEASE_SECONDS): while a limit binds, and the AIMD period. */
  leaseMs: number;
  /** The longest lease, reached by an instance that calls rarely (default 60 s). */
  maxLeaseMs?: number;
  customerShare: number;
  clock: Clock;
  table: CallBudgetTable | Promise<CallBudgetTable>;
  /** How long a request due soon waits in place (default lineHoldMs; 0: the line is off). */
  lineHoldMs?: number;
  /** The pacing margin for the way to the service (default serviceMarginMs). */
  marginMs?: number;
  /** A 429/503 without Retry-After pauses this long. */
  minPauseMs?: number;
  /**
   * How old this process's news of a pause may be when a call starts (default pauseNewsMaxAgeMs;
   * 0: never read the row for it). Older, the row is read first (pauseNews.ts).
   */
  pauseNewsMs?: number;
  /**
   * Requests that cannot start wait in the service's waiting queue and a freed slot pulls the next
   * (shared/agents/pullWaiting.ts): no line is held in place. Off: the line (lineHoldMs) is used.
   */
  pull?: boolean;
  log?: Logger;
}

export interface CallRequestFacts {
  /** The request's id (its first message id): the waiting list's key. */
  key: string;
  orderId: string;
  customer: string;
  /** It was sent back to wait before. */
  waited: boolean;
  /** Epoch ms: when it first waited, or when it was enqueued. */
  since: number;
  /** Epoch ms: its complete-by; a request this close to it is not held in line. */
  completeBy?: number;
}

/** What this process knows of a service's budget, for metrics and the operator's readout. */
export interface GateSnapshot {
  service: string;
  limits: CallLimits;
  rate: number;
  concurrency: number;
  inFlight: number;
  pausedUntil: number;
  waiting: number;
  oldestWaitingSince: number;
  oldestWaitingOrder?: string;
}

/** A request waits in line in place only for a start due within this (pacing: ~1 s, not minutes). */
export const lineHoldMs = 1_000;

/**
 * How much later (or earlier) than the gate counts a start the service may see it. A start is
 * counted from its request's headers on the socket (shared/agents/onTheWire.ts); from there to
 * the service's receipt took 1 ms at the median and 10-47 ms at most (staged bench, 4 hosts on 2
 * cores, 7 runs). The pacer counts its starts over 1 s plus this. 25 ms was tried: no clear gain.
 */
export const serviceMarginMs = 50;

/**
 * How long past its grant's expiry an instance may still start calls while its renewal is on the
 * way. The renewal timer fires a lease after the last renewal ended, so the answer comes one or
 * two table round trips after the expiry: 0.6-1 s under load on the bench's two cores, and with a
 * 500 ms grace the holder of most of the rate had no slot for part of every lease period.
 * Renewing earlier instead doubled the writes to the row, and the conflicts made round trips
 * longer still. Safe: every other instance counts the grant as held until grantGraceMs (2 s) past
 * its expiry, which is more.
 */
export const renewingGraceMs = 1_500;

/** How long an instance seen in the lease row counts towards the share rule's spacing. */
export const instanceMemoryMs = 60_000;

/** How long a pulled request's wait counts towards the expected wait of those sent after it. */
export const pulledWaitMemoryMs = 5_000;

/**
 * How long the entry of an instance standing aside (pull mode, no slot, others hold them all)
 * lasts before it renews and looks for free capacity again.
 */
export const standAsideRenewMs = 5_000;

/** How long after the holders' grants could lapse an instance standing aside looks (clock skew). */
export const lapseLookMs = 100;
/** The shortest wait between two looks of an instance standing aside at the row. */
export const minLookMs = 250;

/** How soon a grant still moving (or outgrown by demand) is renewed: one rate window. */
export const movingRenewMs = 1_000;

/**
 * Renewals one window apart an instance owed more than its grant makes while the grant does not
 * move, before it waits a lease again.
 */
export const maxOwedRenewals = 3;

/** How long after a hold of given-back rate ends an instance owed rate renews (clock skew). */
export const heldLookMs = 100;

/** Calls timed before an instance says what one slot carries (Want.slotRate): one is an outlier. */
export const minCallsForSlotRate = 5;

export class ServiceCallGate {
  private readonly desk = newDesk();
  private readonly pacer = this.desk.pacer;
  /** When this instance's requests sent to the waiting queue fall due (the share rule's book). */
  private waitBook: Array<{ at: number; customer: string }> = [];
  /**
   * Instances seen in the lease row within instanceMemoryMs, with a live grant or not: requests
   * reach every instance that reads the Agent's queue, including those whose grant lapsed.
   */
  private readonly instancesSeen = new Map<string, number>();
  private rateNow = 0;
  /** Pull mode: requests this instance sent to the waiting queue minus those it pulled. */
  private netWaiting = 0;
  /** The other instances' part of the same count, from the lease row. */
  private othersWaiting = 0;
  /** How long the requests pulled here lately had waited (ms; the longest of the last few seconds). */
  private pulledWaits: Array<{ at: number; ms: number }> = [];
  /** The same from the other instances' reports. */
  private othersPulledWaitMs = 0;
  /** Invocations waiting in the line, by line key. */
  private readonly held = new Map<
    string,
    { request: CallRequestFacts; resolve: (a: CallAdmission) => void }
  >();
  private lineTimer: NodeJS.Timeout | undefined;
  private lineTimerAt = 0;
  private lineSeq = 0;
  /** How far apart the returns of requests sent back are booked (from the last lease row). */
  private returnSpacing: number | undefined;
  private readonly limited: boolean;
  private grantExpiresAt = 0;
  private renewing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private timerDueAt = 0;
  /** When the next renewal is due after the last one (the lease follows demand). */
  private renewEveryMs: number;
  private lastActivity = 0;
  private periodStart = 0;
  private started = 0;
  private asked = 0;
  private peakInFlight = 0;
  private concurrencyWaits = 0;
  private pausing: Promise<void> | undefined;
  /** How fresh what this process knows of a pause is (a call starts only on news within its age limit). */
  private readonly news: PauseNews;
  private readonly waiting = new Map<string, { since: number; orderId: string; at: number }>();
  /** The waiting count the lease row last got from this instance (the operators' readout shows it). */
  private reportedWaiting = 0;
  /** Recent call durations, for "when does a concurrency slot free up". */
  private readonly durations: number[] = [];

  constructor(private readonly o: CallGateOptions) {
    this.limited = isLimited(o.limits);
    this.news = new PauseNews(o.pauseNewsMs ?? pauseNewsMaxAgeMs);
    this.renewEveryMs = o.leaseMs;
    this.pacer.marginMs = o.marginMs ?? serviceMarginMs;
    if (!this.limited) {
      this.pacer.rate = Number.POSITIVE_INFINITY;
      this.pacer.concurrency = Number.POSITIVE_INFINITY;
    }
  }

  /** Whether the request may call now, or when it should be read again. */
  async admit(request: CallRequestFacts): Promise<CallAdmission> {
    const now = this.o.clock.now().getTime();
    this.lastActivity = now;
    this.asked += 1;
    if (now >= this.usableUntil()) {
      await this.renew().catch((e: unknown) =>
        this.o.log?.warn('could not renew the call budget lease', {
          service: this.o.service,
          error: (e as Error).message,
        }),
      );
    }
    this.keepRenewing();
    // A call may start here now: it starts only on fresh news of a pause (pauseNews.ts). Without
    // a free slot the request goes to wait unread: an instance standing aside receives requests
    // all the time and calls none (a read a quiet second there: 0.1 a order at 20 orders/s).
    if (this.pacer.inFlight < this.pacer.concurrency && this.pacer.rate > 0) await this.pauseKnown();
    const t = this.o.clock.now().getTime();
    // Within the grace a renewal is on its way (an answer can come back already expired when the
    // table is slow): the grant still holds.
    if (this.limited && t >= this.usableUntil()) {
      this.pacer.rate = 0;
      this.pacer.concurrency = 0;
    }
    // Only a limited service has slots that pull; an unlimited one's pause (a 429) still sends the
    // request back to its own queue, due when the pause ends.
    if (this.pulling) return this.admitPulling(request, t);
    const options = this.lineOptions();
    const key = `${request.key}#${(this.lineSeq += 1)}`;
    const mayHold =
      request.completeBy === undefined || request.completeBy - t > 2 * (options.holdMs + options.callMs);
    const { decision, sentBack } = offer(
      this.desk,
      { key, customer: request.customer, since: request.since, waited: request.waited, mayHold },
      t,
      options,
    );
    traceCall({ ev: 'arrive', inst: this.o.instance, t, key: request.key, waited: request.waited });
    if (sentBack) this.settle(sentBack.entry.key, sentBack.wait);
    if (decision.kind === 'hold') {
      traceCall({ ev: 'hold', inst: this.o.instance, t, key: request.key });
      this.concurrencyWaits += 1;
      const held = new Promise<CallAdmission>((resolve) => this.held.set(key, { request, resolve }));
      this.pump();
      return held;
    }
    const a = decision;
    if (a.kind === 'start') {
      if (a.delayMs) await new Promise((r) => setTimeout(r, a.delayMs));
      this.onStart(request);
    } else this.onWait(request, a, t);
    return a;
  }

  /**
   * Pull mode: a request starts if a slot and the rate allow it now, else it goes to the waiting
   * queue, due at once unless its customer is past its share of this instance's waiting requests
   * (booked later, so other customers' requests pass it).
   */
  private admitPulling(request: CallRequestFacts, t: number): CallAdmission {
    const p = this.pacer;
    // Older requests first: while requests may wait (or a pull loop here is about to take the
    // free slot) a new one goes behind them, and this invocation pulls the oldest instead.
    if (startableAt(p, t) === t && this.activeChains === 0 && !this.mayHaveWaiting()) {
      recordStart(p, t);
      this.unsent.set(request.key, t);
      this.onStart(request);
      return { kind: 'start' };
    }
    const reason: Extract<CallAdmission, { kind: 'wait' }>['reason'] =
      t < p.pausedUntil
        ? 'paused'
        : !(p.rate > 0 && p.concurrency > 0)
          ? 'no-grant'
          : p.inFlight >= p.concurrency
            ? 'concurrency'
            : 'rate';
    const rate = this.rateNow || (this.o.limits.maxCallsPerSecond ?? 0);
    const spacing = waitingSpacingMs(rate, this.instancesSeen.size);
    const from = Math.max(t, p.pausedUntil);
    this.waitBook = this.waitBook.filter((e) => e.at > t - waitingRecentMs);
    // A request back from its delay (a customer past its share) served it: due at once now.
    const at =
      spacing === undefined || request.waited
        ? from
        : Math.max(
            from,
            waitingDueAt(this.waitBook, request.customer, t, {
              spacingMs: spacing,
              share: this.o.customerShare,
            }),
          );
    this.waitBook.push({ at, customer: request.customer });
    this.waitBook.sort((x, y) => x.at - y.at);
    const a = { kind: 'wait' as const, at, reason };
    // Behind every request waiting before it: the service's rate drains them (the lease row's
    // count), and no sooner than the requests pulled lately had waited (a count a lease old, or
    // off by an instance that left, must not let a request's complete-by pass while it waits).
    const ahead = Math.max(0, this.othersWaiting + this.netWaiting);
    this.netWaiting += 1;
    this.lastDueAt = Math.max(this.lastDueAt, a.at);
    const byCount = rate > 0 ? t + (1000 * ahead) / rate : a.at;
    const startBy = Math.max(a.at, byCount, t + this.recentPulledWaitMs(t));
    const wait = { ...a, startBy };
    this.onWait(request, wait, t);
    return wait;
  }

  /** This process's name in the lease row. */
  get instance(): string {
    return this.o.instance;
  }

  /** Whether the service pushed back (a 429/503) and its pause has not ended. */
  get paused(): boolean {
    return this.o.clock.now().getTime() < this.pacer.pausedUntil;
  }

  /** Requests that cannot start wait in the waiting queue and free slots pull them (pull mode). */
  get pulling(): boolean {
    return this.o.pull === true && this.limited;
  }

  /** How much later an instance without a slot passes a pull token on (most likely elsewhere). */
  passOnMs(): number {
    return Math.min(this.returnSpacing ?? this.o.leaseMs, this.o.leaseMs);
  }

  /** Until when this instance may start calls on its grant (its renewal may be on the way). */
  private usableUntil(): number {
    return this.timer ? this.grantExpiresAt + renewingGraceMs : this.grantExpiresAt;
  }

  /**
   * A pull loop found no usable grant: whether the last one had slots and its renewal is on the
   * way, waited for (at most `maxMs`). A loop that ended there left the slots with no loop when
   * the renewal landed, and pull tokens went from instance to instance for 4 s (staged bench).
   */
  async renewalOnTheWay(maxMs: number): Promise<boolean> {
    const renewal = this.renewing;
    if (!renewal || !(this.grantedSlots > 0)) return false;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      renewal.catch(() => undefined),
      new Promise((r) => {
        timer = setTimeout(r, maxMs);
      }),
    ]);
    clearTimeout(timer);
    return true;
  }

  /** Renews the grant now if it lapsed (a pull token arrived at an instance that was idle). */
  async refresh(): Promise<void> {
    this.lastActivity = this.o.clock.now().getTime();
    this.asked += 1;
    if (this.lastActivity >= this.grantExpiresAt) await this.renew().catch(() => undefined);
    this.keepRenewing();
  }

  /**
   * When a freed slot here could start the next waiting request: now, a moment later (the rate
   * window), or undefined (no grant, paused, every slot in use).
   */
  nextSlotAt(): number | undefined {
    const now = this.o.clock.now().getTime();
    if (this.limited && now >= this.usableUntil()) return undefined;
    return startableAt(this.pacer, now);
  }

  /** How many slots are free now (waiting requests this instance may pull at once). */
  freeSlots(): number {
    if (this.nextSlotAt() === undefined) return 0;
    const free = this.pacer.concurrency - this.pacer.inFlight;
    return Number.isFinite(free) ? Math.max(0, free) : 1;
  }

  /** Claims a slot for a request about to be pulled: the claim's time, or undefined if none is free now. */
  claim(): number | undefined {
    const now = this.o.clock.now().getTime();
    if (this.nextSlotAt() !== now) return undefined;
    recordStart(this.pacer, now);
    this.lastActivity = now;
    return now;
  }

  /** Epoch ms: until when the entry this instance wrote standing aside lasts (0: not aside). */
  private asideUntil = 0;

  /** Renewals in a row that found it owed more than it got and did not move its grant. */
  private owedRenewals = 0;

  /** How long this instance's last three renewals took, from their start until they landed. */
  private tookMs: number[] = [];

  /** The slots of this instance's last grant (the pacer's drop to 0 when it lapses). */
  private grantedSlots = 0;

  /** Pull loops running in this process's invocations (shared/agents/pullWaiting.ts). */
  activeChains = 0;
  /** Whether one of them waits for the rate window (the instance's last loop, kept going). */
  windowWaiter = false;
  /** Starts a pull loop here from outside an invocation: a token addressed to this instance. */
  wake: (() => void) | undefined;
  /** The next waiting request, read ahead by this instance's pull loops (shared/agents/pullAhead.ts). */
  readAhead: PullAhead | undefined;
  private lastTokenAt = 0;

  /** Epoch ms: the latest due time of a request this instance sent to wait, or last pulled. */
  private lastDueAt = 0;
  /** Epoch ms: when a pull here last found the waiting queue empty. */
  private lastEmptyAt = 0;
  /** The same two times from the other instances' reports in the lease row. */
  private othersDueAt = 0;
  private othersEmptyAt = 0;

  /**
   * Whether requests may still wait in the waiting queue: something fell due (or was pulled) after
   * the last time any instance found it empty. Times, not counts: an instance that leaves the row
   * takes its report with it, and a count would then be off for good.
   */
  mayHaveWaiting(): boolean {
    return Math.max(this.lastDueAt, this.othersDueAt) > Math.max(this.lastEmptyAt, this.othersEmptyAt);
  }

  /** Whether the other instances' reports in `row` say requests may still wait (see mayHaveWaiting). */
  private othersReportWaiting(row: BudgetRow, now: number): boolean {
    const others = othersWaitTimes(row, this.o.instance, now);
    return Math.max(this.lastDueAt, others.dueAt) > Math.max(this.lastEmptyAt, others.emptyAt);
  }

  /** A pull here found the waiting queue empty. */
  foundEmpty(): void {
    this.lastEmptyAt = this.o.clock.now().getTime();
  }

  /** Requests read ahead here went back to the waiting queue: they wait there, due now. */
  cameBack(): void {
    this.lastDueAt = Math.max(this.lastDueAt, this.lastEmptyAt + 1, this.o.clock.now().getTime());
  }

  /**
   * Whether a request sent to wait due at `at` needs a pull token of its own: one due later than
   * now does (no loop may be running then); of those due now, one per pass-on period is enough.
   */
  wantsToken(at: number): boolean {
    const now = this.o.clock.now().getTime();
    if (at > now + 100 || now - this.lastTokenAt >= this.passOnMs()) {
      if (at <= now + 100) this.lastTokenAt = now;
      return true;
    }
    return false;
  }

  /** The longest wait of the requests pulled lately, here or (by the lease row) elsewhere. */
  private recentPulledWaitMs(now: number): number {
    this.pulledWaits = this.pulledWaits.filter((w) => w.at > now - pulledWaitMemoryMs);
    return Math.max(this.othersPulledWaitMs, ...this.pulledWaits.map((w) => w.ms), 0);
  }

  /** A pulled request had waited this long since it was first sent to wait. */
  waitedFor(ms: number): void {
    this.pulledWaits.push({ at: this.o.clock.now().getTime(), ms });
  }

  /** A request was read from the waiting queue (it starts, or was past its time and dropped). */
  tookWaiting(): void {
    this.netWaiting -= 1;
    this.lastDueAt = Math.max(this.lastDueAt, this.o.clock.now().getTime());
  }

  /** The pulled request is in hand and starts now (its start counts from now), or none came. */
  pulled(claimedAt: number, request: CallRequestFacts | undefined): void {
    const now = this.o.clock.now().getTime();
    restampStart(this.pacer, claimedAt, request ? now : undefined);
    if (!request) return;
    this.unsent.set(request.key, now);
    this.asked += 1;
    this.onStart(request);
  }

  /**
   * Starts counted in the rate window and not yet sent (pull mode), by request key: a start is
   * moved to when its request is sent. Between the gate's decision and the service's receipt
   * lay 6-74 ms, unevenly, against a 50 ms margin (bench: 6 calls in 1 s at 5/s). Moving a start
   * later never lets the window admit more (restampStart).
   */
  private readonly unsent = new Map<string, number>();

  private lineOptions(): LineOptions {
    return {
      customerShare: this.o.customerShare,
      callMs: this.typicalCallMs(),
      leaseMs: Math.min(this.o.leaseMs, 1_100),
      horizonMs: Math.max(10_000, 2 * this.o.leaseMs),
      maxHoldMs: 50,
      holdMs: this.o.lineHoldMs ?? lineHoldMs,
      ...(this.returnSpacing !== undefined ? { returnSpacingMs: this.returnSpacing } : {}),
    };
  }

  private onStart(request: CallRequestFacts): void {
    traceCall({
      ev: 'start',
      inst: this.o.instance,
      t: this.o.clock.now().getTime(),
      key: request.key,
      rec: this.pacer.starts.at(-1),
    });
    this.started += 1;
    this.peakInFlight = Math.max(this.peakInFlight, this.pacer.inFlight);
    this.waiting.delete(request.key);
    // The last waiting request started: say so now, not at the end of a lease that may be a
    // minute long (one renewal per drained queue), so operators do not see calls waiting that are not.
    if (this.limited && this.waiting.size === 0 && this.reportedWaiting > 0) {
      this.reportedWaiting = 0;
      void this.renew().catch(() => undefined);
    }
  }

  private onWait(request: CallRequestFacts, a: Extract<CallAdmission, { kind: 'wait' }>, t: number): void {
    traceCall({
      ev: 'wait',
      inst: this.o.instance,
      t,
      key: request.key,
      at: a.at,
      reason: a.reason,
      ...(a.startBy !== undefined ? { startBy: a.startBy, ahead: this.othersWaiting + this.netWaiting } : {}),
    });
    recordCallWait(this.o.service, a.reason);
    // Short inside a long lease (demand grew): renew now, not at the lease's end (in pull mode a
    // request waits once, so no later wait would come to renew: the row, and the operators'
    // readout, showed nothing waiting for the rest of a 60 s lease), and then every window while
    // the grant moves, not every short lease: with the default 5 s lease each step up of a grant
    // cut to one request's want came a lease later (staged bench: 5 s at 5/s). Now, not a window
    // after the last renewal: the first second of a backlog ran on grants of 1 slot (bench).
    if ((a.reason === 'rate' || a.reason === 'concurrency') && this.renewEveryMs > this.o.leaseMs) {
      this.renewEveryMs = Math.min(this.o.leaseMs, movingRenewMs);
      void this.renew().catch(() => undefined);
    }
    if (a.reason === 'concurrency') this.concurrencyWaits += 1;
    this.waiting.set(request.key, { since: request.since, orderId: request.orderId, at: a.at });
  }

  /** A held invocation leaves the line: it starts, or goes back to its queue. */
  private settle(key: string, a: CallAdmission): void {
    const h = this.held.get(key);
    if (!h) return;
    this.held.delete(key);
    if (a.kind === 'start') this.onStart(h.request);
    else this.onWait(h.request, a, this.o.clock.now().getTime());
    h.resolve(a);
  }

  /** Starts what the line may start now and sends back what may not wait; looks again when due. */
  private pump(): void {
    if (this.desk.line.length === 0) return;
    const now = this.o.clock.now().getTime();
    const r = pumpLine(this.desk, now, this.lineOptions());
    for (const e of r.start) this.settle(e.key, { kind: 'start' });
    for (const s of r.sentBack) this.settle(s.entry.key, s.wait);
    if (r.wakeAt !== undefined && (!this.lineTimer || r.wakeAt < this.lineTimerAt)) {
      if (this.lineTimer) clearTimeout(this.lineTimer);
      this.lineTimerAt = r.wakeAt;
      this.lineTimer = setTimeout(
        () => {
          this.lineTimer = undefined;
          this.pump();
        },
        Math.max(0, r.wakeAt - now),
      );
    }
  }

  /** The request admitted under `key` is being sent now: its start counts from now. */
  sending(key: string): void {
    this.restamp(key, 'send');
  }

  /**
   * The request's headers reached the socket (shared/agents/onTheWire.ts): its start counts from
   * now, once (a retry's write moves nothing).
   */
  onTheWire(key: string): void {
    this.restamp(key, 'wire');
  }

  private restamp(key: string, ev: 'send' | 'wire'): void {
    const stamp = this.unsent.get(key);
    if (stamp === undefined) return;
    const now = this.o.clock.now().getTime();
    // Kept after the send for the write that follows; forgotten with the other stale ones.
    if (ev === 'wire') this.unsent.delete(key);
    else this.unsent.set(key, now);
    restampStart(this.pacer, stamp, now);
    traceCall({ ev, inst: this.o.instance, t: now, key, rec: stamp });
  }

  /**
   * Before a call: a pause another instance recorded is known here (pauseNews.ts). Reads the row
   * only when neither the row nor the service said anything within the news' age limit (1 s by
   * default); a failed read lets the call go (the grant still bounds it) and the next call looks
   * again.
   */
  async pauseKnown(): Promise<void> {
    const warn = (error: string) =>
      this.o.log?.warn('could not read the call budget row for a pause', { service: this.o.service, error });
    const answered = await this.news
      .fresh(this.o.clock.now().getTime(), async () => {
        const { row } = await (await this.o.table).read(this.o.service);
        this.pacer.pausedUntil = Math.max(this.pacer.pausedUntil, row.pausedUntil);
        traceCall({ ev: 'look', inst: this.o.instance, t: this.o.clock.now().getTime() });
      })
      .catch((e: unknown) => warn((e as Error).message));
    if (answered === false) warn(`no answer within ${pauseLookWaitMs} ms; the call goes on`);
  }

  /** The service answered one of this process's calls with `status` (none: no answer). */
  answered(status: number | undefined): void {
    if (acceptedStatus(status)) this.news.heard(this.o.clock.now().getTime());
  }

  /** A started call ended (after `ms`). */
  done(ms: number): void {
    release(this.pacer);
    // A start never sent (its call ended before an attempt), or sent and never seen on the socket,
    // is forgotten within a window's worth.
    if (this.unsent.size > 64) {
      const old = this.o.clock.now().getTime() - 2 * rateWindowMs;
      for (const [k, at] of this.unsent) if (at < old) this.unsent.delete(k);
    }
    traceCall({ ev: 'end', inst: this.o.instance, t: this.o.clock.now().getTime(), ms });
    this.durations.push(ms);
    if (this.durations.length > 50) this.durations.shift();
    this.pump();
    const waiters = this.slotWaiters;
    this.slotWaiters = [];
    for (const w of waiters) w();
  }

  private slotWaiters: Array<() => void> = [];

  /** Resolves when one of this process's calls to the service ends (its slot is free again). */
  slotFreed(): Promise<void> {
    return new Promise((resolve) => this.slotWaiters.push(resolve));
  }

  /**
   * The service pushed back: this process stops starting calls at once, and the pause and the
   * lowered rate go to the lease row for every other instance (one write per pause).
   */
  pushback(retryAfterMs: number | undefined): void {
    const now = this.o.clock.now().getTime();
    const until = now + Math.max(this.o.minPauseMs ?? 1_000, retryAfterMs ?? 0);
    const fresh = now >= this.pacer.pausedUntil;
    this.pacer.pausedUntil = Math.max(this.pacer.pausedUntil, until);
    // Whoever waits in line here goes back to its queue until the pause ends.
    this.pump();
    if (!fresh || this.pausing) return;
    recordCallPause(this.o.service);
    this.pausing = (async () => {
      const table = await this.o.table;
      // afterRefusal keeps each grant's other fields (the instances' reports) as they were.
      const row = await table.update(
        this.o.service,
        (r) => afterRefusal(r, now, retryAfterMs, this.o.minPauseMs ?? 1_000) as typeof r,
      );
      this.apply(row);
    })()
      .catch((e: unknown) =>
        this.o.log?.warn('could not record the pushback in the call budget', {
          service: this.o.service,
          error: (e as Error).message,
        }),
      )
      .finally(() => {
        this.pausing = undefined;
      });
  }

  snapshot(): GateSnapshot {
    const now = this.o.clock.now().getTime();
    this.forgetStale(now);
    let oldest: { since: number; orderId: string } | undefined;
    for (const w of this.waiting.values()) if (!oldest || w.since < oldest.since) oldest = w;
    for (const { request: w } of this.held.values()) if (!oldest || w.since < oldest.since) oldest = w;
    return {
      service: this.o.service,
      limits: this.o.limits,
      rate: this.pacer.rate,
      concurrency: this.pacer.concurrency,
      inFlight: this.pacer.inFlight,
      pausedUntil: this.pacer.pausedUntil,
      waiting: this.waiting.size + this.held.size,
      oldestWaitingSince: oldest?.since ?? 0,
      ...(oldest ? { oldestWaitingOrder: oldest.orderId } : {}),
    };
  }

  /** Stops the renewal timer (tests, shutdown); the grant lapses at its expiry. */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.lineTimer) clearTimeout(this.lineTimer);
    this.lineTimer = undefined;
  }

  private get maxLeaseMs(): number {
    return Math.max(this.o.leaseMs, this.o.maxLeaseMs ?? 60_000);
  }

  private typicalCallMs(): number {
    if (this.durations.length === 0) return 200;
    const sorted = [...this.durations].sort((a, b) => a - b);
    return Math.max(20, sorted[Math.floor(sorted.length / 2)]);
  }

  /** Requests that waited here and were picked up elsewhere are forgotten after a while. */
  private forgetStale(now: number): void {
    for (const [k, w] of this.waiting) if (w.at + 2 * this.o.leaseMs < now) this.waiting.delete(k);
  }

  private keepRenewing(): void {
    if (this.timer) return;
    this.scheduleRenewal();
  }

  /**
   * The next renewal, a little before the grant expires: renewed at expiry, the grant lapsed for
   * the table round trip every lease period and a pull loop found no slot.
   */
  private scheduleRenewal(): void {
    const delay = this.renewEveryMs;
    this.timerDueAt = this.o.clock.now().getTime() + delay;
    this.timer = setTimeout(() => this.tick(), delay);
    this.timer.unref();
  }

  /**
   * A renewal shortened the lease (the limit binds now): a renewal timer set for the long lease
   * would let the short grant lapse while this instance works (bench: every second, 25-45 % of it).
   */
  private renewalFollowsLease(): void {
    if (!this.timer) return;
    const due = this.o.clock.now().getTime() + this.renewEveryMs;
    if (this.timerDueAt <= due) return;
    clearTimeout(this.timer);
    this.scheduleRenewal();
  }

  private tick(): void {
    const now = this.o.clock.now().getTime();
    // Idle: stop renewing (no cost at rest); the grant lapses and others take it.
    if (now - this.lastActivity > 2 * this.o.leaseMs && this.waiting.size === 0) {
      this.close();
      return;
    }
    this.renew()
      .catch((e: unknown) =>
        this.o.log?.warn('could not renew the call budget lease', {
          service: this.o.service,
          error: (e as Error).message,
        }),
      )
      .finally(() => {
        if (this.timer) this.scheduleRenewal();
      });
  }

  private renew(): Promise<void> {
    this.renewing ??= this.renewOnce().finally(() => {
      this.renewing = undefined;
    });
    return this.renewing;
  }

  private async renewOnce(): Promise<void> {
    const table = await this.o.table;
    const now = this.o.clock.now().getTime();
    this.forgetStale(now);
    if (this.limited && (await this.watchAside(table, now))) return;
    const seconds = Math.max(1, (now - (this.periodStart || now - this.o.leaseMs)) / 1000);
    // What this period counted, taken now: what arrives during the table round trip belongs to the
    // next period (reset after the write, those were lost, and a holder's next ask fell to 1.5/s).
    const counted = {
      asked: this.asked,
      started: this.started,
      concurrencyWaits: this.concurrencyWaits,
    };
    const nextPeriod = () => {
      this.periodStart = now;
      this.asked -= counted.asked;
      this.started -= counted.started;
      this.concurrencyWaits -= counted.concurrencyWaits;
      this.peakInFlight = this.pacer.inFlight;
    };
    if (!this.limited) {
      // Nothing to share: only learn of a pause another instance recorded (one read).
      this.apply((await table.read(this.o.service)).row);
      this.renewEveryMs = renewalIntervalMs(counted.started / seconds, this.o.leaseMs, this.maxLeaseMs);
      this.grantExpiresAt = now + this.renewEveryMs;
      this.renewalFollowsLease();
      nextPeriod();
      return;
    }
    // Ask for what it was asked, with room to grow; concurrency for the peak plus those that waited for it.
    // Pull mode: where a slot sits no longer decides which requests it serves (it pulls them), so
    // an instance without one stands aside while others hold every slot or all the rate: the
    // slots stay with the holders instead of moving between instances.
    // A slot its last grant gave it counts even if that grant lapsed meanwhile (a slow table):
    // giving it up left the slot to an instance without rate (bench: 2 of 5 calls/s unused).
    // Judged from the row this renewal decides on: an instance's first renewal had not seen the
    // row, asked for a slot, was owed some of a busy holder's slots and kept them (staged bench:
    // two holders of 10/s and 4 slots ran at about 85 % of the limit, one of 20/s and 8 at 91 %).
    // What it wants, from the row as read for this renewal: the others' reports of requests sent
    // to wait arrive there first (judged from the last renewal's copy, a lone holder asked for
    // 7/s while 380 requests waited, and took a 7 s ramp to 20/s).
    const wantIn = (r: BudgetRow, at: number): { want: Want; waiting: boolean; aside: boolean } => {
      const waiting = this.o.pull === true && (this.mayHaveWaiting() || this.othersReportWaiting(r, at));
      if (this.standsAside(r, at))
        return { want: { rate: 0, concurrency: 0, inFlight: this.pacer.inFlight }, waiting, aside: true };
      return {
        aside: false,
        want: {
          ...shareWanted({
            askedPerSecond: counted.asked / seconds,
            peakInFlight: this.peakInFlight,
            concurrencyWaits: counted.concurrencyWaits,
            waiting,
            holds: { rate: this.pacer.rate, concurrency: this.pacer.concurrency },
            rateInForce: rateInForce(this.o.limits, r, at),
          }),
          inFlight: this.pacer.inFlight,
          ...(this.o.pull === true ? { keepsHeld: true } : {}),
          ...(this.durations.length >= minCallsForSlotRate ? { slotRate: 1000 / this.typicalCallMs() } : {}),
        },
        waiting,
      };
    };
    const snap = this.snapshot();
    recordGate(snap, now);
    this.reportedWaiting = snap.waiting;
    const report: GrantReport = {
      waiting: snap.waiting,
      oldestWaitingSince: snap.oldestWaitingSince,
      ...(snap.oldestWaitingOrder ? { oldestWaitingOrder: snap.oldestWaitingOrder } : {}),
      startedPerSecond: counted.started / seconds,
      ...(this.o.pull
        ? {
            waitingNet: this.netWaiting,
            waitDueAt: this.lastDueAt,
            waitEmptyAt: this.lastEmptyAt,
            pulledWaitMs: this.recentPulledWaitMs(now),
          }
        : {}),
    };
    let leaseMs = this.o.leaseMs;
    let owed = false;
    // For the trace: how many reads the renewal took, and when the last one answered.
    let attempts = 0;
    let lastReadAt = now;
    let asideNow = false;
    const row = await table.update(this.o.service, (r) => {
      // Each attempt decides at its own read: a renewal that lost the row to others for seconds
      // dated its grant from its first read, and it landed expired (staged bench: 7 s).
      const at = this.o.clock.now().getTime();
      attempts += 1;
      lastReadAt = at;
      const { want, waiting, aside } = wantIn(r, at);
      asideNow = aside;
      // Standing aside it holds nothing, so its entry (its reports) may last longer: renewing every
      // lease, three instances standing aside kept the holder's renewal losing the row (staged
      // bench: 20 times in a row, its grant lapsed and nothing was called for 5 s).
      const minMs = aside ? Math.max(this.o.leaseMs, standAsideRenewMs) : this.o.leaseMs;
      const next = renewGrantFor(r, this.o.instance, want, this.o.limits, at, {
        minMs,
        maxMs: Math.max(minMs, this.maxLeaseMs),
        startedPerSecond: report.startedPerSecond,
        waiting,
      });
      leaseMs = next.leaseMs;
      owed = next.owed && !aside;
      return withGrants(
        next.row,
        next.row.grants.map((g) => (g.instance === this.o.instance ? { ...g, ...report } : g)),
      );
    });
    const before = { rate: this.pacer.rate, concurrency: this.grantedSlots };
    const landed = this.o.clock.now().getTime();
    this.tookMs = [...this.tookMs.slice(-2), landed - now];
    if (tracing)
      traceCall({
        ev: 'renew',
        inst: this.o.instance,
        t: landed,
        ms: landed - now,
        attempts,
        readMs: lastReadAt - now,
      });
    nextPeriod();
    this.apply(row);
    this.wakeIfIdle(before);
    // While the grant still moves at the short lease (shares settling after demand grew, or
    // others came or left), the next renewal comes one window later; once it holds still, a lease.
    const mine = row.grants.find((g) => g.instance === this.o.instance);
    const moving =
      mine !== undefined && (mine.rate !== before.rate || mine.concurrency !== before.concurrency);
    this.renewEveryMs = moving && leaseMs === this.o.leaseMs ? Math.min(leaseMs, movingRenewMs) : leaseMs;
    // Owed more than it got (others hold it): what they give back at their renewals, a window or
    // so away, it takes one window later too, not a lease later; a few times in a row at most
    // while its grant does not move (a holder's calls in flight can keep its slots for good).
    this.owedRenewals = owed && !moving ? this.owedRenewals + 1 : 0;
    // Rate given back is free once its hold ends: renewed just after, not up to a window later.
    if (owed && this.owedRenewals <= maxOwedRenewals) {
      const freesAt = heldRateFreesAt(row, this.o.instance, landed);
      const untilFree = freesAt === undefined ? movingRenewMs : freesAt + heldLookMs - landed;
      this.renewEveryMs = Math.min(this.renewEveryMs, movingRenewMs, Math.max(minLookMs, untilFree));
    }
    // A holder whose renewals are slow renews early enough to land within half the grace.
    if (!asideNow && mine && mine.rate > 0 && mine.concurrency > 0)
      this.renewEveryMs = renewAheadMs(
        mine.expiresAt,
        landed,
        Math.max(...this.tookMs),
        leaseMs,
        this.renewEveryMs,
        renewingGraceMs / 2,
      );
    this.asideUntil = asideNow ? lastReadAt + leaseMs : 0;
    if (asideNow) this.lookAgainAfter(row, this.o.clock.now().getTime());
    this.renewalFollowsLease();
  }

  /**
   * Pull mode: a renewal gave this instance a slot it can start calls on (more slots, or rate where
   * it had none) while none of its loops runs and requests may wait: nothing else would start one
   * here (no request may come to its queue, and tokens are dropped where loops run).
   */
  private wakeIfIdle(before: { rate: number; concurrency: number }): void {
    if (!this.pulling || this.activeChains > 0 || !this.mayHaveWaiting()) return;
    if (!(this.grantedSlots > 0 && this.pacer.rate > 0)) return;
    if (this.grantedSlots > before.concurrency || !(before.rate > 0)) this.wake?.();
  }

  /**
   * Pull mode: an instance without a slot stands aside while the others' live grants hold every
   * slot or all the rate (othersHoldAll).
   */
  private standsAside(r: BudgetRow, at: number): boolean {
    return (
      this.o.pull === true && !(this.grantedSlots > 0) && othersHoldAll(r, this.o.instance, this.o.limits, at)
    );
  }

  /**
   * Standing aside, its entry still good for a while: one read of the row and no write while the
   * holders still hold everything, the next look when they could lapse. False: renew in full.
   */
  private async watchAside(table: CallBudgetTable, now: number): Promise<boolean> {
    if (!(this.asideUntil - now > this.o.leaseMs / 2)) return false;
    const { row } = await table.read(this.o.service);
    const at = this.o.clock.now().getTime();
    if (!this.standsAside(row, at)) return false;
    if (tracing)
      traceCall({ ev: 'renew', inst: this.o.instance, t: at, ms: at - now, attempts: 0, readMs: at - now });
    this.apply(row);
    this.lookAgainAfter(row, at);
    this.renewalFollowsLease();
    return true;
  }

  /**
   * Standing aside: the next look at the row comes when the holders' grants could lapse (a
   * holder whose renewal was held 5 s left every slot idle until the instances standing aside
   * renewed their entries, 3 s later in the staged bench), or when its own entry is due.
   */
  private lookAgainAfter(row: BudgetRow, at: number): void {
    const lapse = holdersLapseAt(row, this.o.instance, at);
    const due = Math.min(this.asideUntil, (lapse ?? Number.POSITIVE_INFINITY) + lapseLookMs);
    this.renewEveryMs = Math.max(minLookMs, due - at);
  }

  private apply(row: BudgetRow): void {
    this.pacer.pausedUntil = Math.max(this.pacer.pausedUntil, row.pausedUntil);
    this.news.heard(this.o.clock.now().getTime());
    if (!this.limited) return;
    const mine = row.grants.find((g) => g.instance === this.o.instance);
    if (!mine) return;
    this.pacer.rate = mine.rate;
    this.pacer.concurrency = mine.concurrency;
    this.grantedSlots = mine.concurrency;
    traceCall({
      ev: 'grant',
      inst: this.o.instance,
      t: this.o.clock.now().getTime(),
      rate: mine.rate,
      conc: mine.concurrency,
      exp: mine.expiresAt,
      ...(tracing
        ? {
            want: mine.wantRate,
            wantConc: mine.wantConcurrency,
            slotRate: mine.slotRate,
            factor: row.rateFactor,
            held: row.grants
              .filter((g) => g.instance !== this.o.instance)
              .map((g) => `${g.rate}/${g.concurrency}`),
          }
        : {}),
    });
    const now = this.o.clock.now().getTime();
    const live = row.grants.filter((g) => g.expiresAt > now);
    // A customer past its share is spaced for every instance its requests may reach: counting
    // only live grants, an instance whose grant lapsed (a 3 s table round trip at a burst's start)
    // was not counted, and a burst fell due at about twice the rate.
    this.instancesSeen.set(this.o.instance, now);
    for (const g of row.grants)
      this.instancesSeen.set(
        g.instance,
        Math.max(this.instancesSeen.get(g.instance) ?? 0, Math.min(now, g.expiresAt)),
      );
    for (const [i, seen] of this.instancesSeen)
      if (seen < now - instanceMemoryMs) this.instancesSeen.delete(i);
    const others = (live as ReportedGrant[]).filter((g) => g.instance !== this.o.instance);
    this.othersWaiting = others.reduce((n, g) => n + (g.waitingNet ?? 0), 0);
    ({ dueAt: this.othersDueAt, emptyAt: this.othersEmptyAt } = othersWaitTimes(row, this.o.instance, now));
    this.othersPulledWaitMs = Math.max(0, ...others.map((g) => g.pulledWaitMs ?? 0));
    this.rateNow = rateInForce(this.o.limits, row, now);
    this.returnSpacing = returnSpacingMs(
      rateInForce(this.o.limits, row, now),
      live.filter((g) => g.concurrency > 0 && g.rate > 0).length,
      live.length,
      mine.concurrency > 0 && mine.rate > 0,
    );
    // With nothing granted, ask again as soon as what others gave back is free (one window).
    // (Standing aside, it asked for nothing: it looks again at its entry's end.)
    const aside = mine.wantRate === 0 && mine.wantConcurrency === 0;
    this.grantExpiresAt =
      (mine.rate > 0 && mine.concurrency > 0) || aside
        ? mine.expiresAt
        : Math.min(mine.expiresAt, this.o.clock.now().getTime() + 1_100);
    this.pump();
  }
}

/** The latest due time the other live grants in `row` report, and the latest "found empty". */
function othersWaitTimes(row: BudgetRow, instance: string, now: number): { dueAt: number; emptyAt: number } {
  const others = (row.grants as ReportedGrant[]).filter((g) => g.instance !== instance && g.expiresAt > now);
  return {
    dueAt: Math.max(0, ...others.map((g) => g.waitDueAt ?? 0)),
    emptyAt: Math.max(0, ...others.map((g) => g.waitEmptyAt ?? 0)),
  };
}

function withGrants(row: BudgetRow, grants: ReportedGrant[]): BudgetRow & { grants: ReportedGrant[] } {
  return { ...row, grants };
}

/** The gates of one process, one per service. */
export class CallBudgets {
  private readonly gates = new Map<string, ServiceCallGate>();

  constructor(private readonly make: (service: string) => ServiceCallGate) {}

  gate(service: string): ServiceCallGate {
    let g = this.gates.get(service);
    if (!g) {
      g = this.make(service);
      this.gates.set(service, g);
    }
    return g;
  }

  snapshots(): GateSnapshot[] {
    return [...this.gates.values()].map((g) => g.snapshot());
  }

  close(): void {
    for (const g of this.gates.values()) g.close();
  }
}
