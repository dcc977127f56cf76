import type { InvocationContext } from '@azure/functions';
import {
  awaitsNotStarted,
  decideRepair,
  outstandingRequest,
  outstandingStep,
  passEnded,
  passRead,
  passReads,
  passStarted,
  type QueueView,
  type RepairPass,
  type RepairRecord,
  type RepairSchedule,
} from '../domain/index.js';
import type { QueueBacklog } from '../messaging/backlog.js';
import { deadLetterSourceList } from '../messaging/deadLetters.js';
import { queues } from '../messaging/entities.js';
import { applyEvent } from '../app/applyEvent.js';
import type { Dependencies } from '../app/ports.js';
import { carryOut } from '../messaging/commandMessages.js';
import type { ReconcileCursor } from '../stateStore/inFlightIndex.js';
import { inFlightSummary, sweepEveryAccount } from '../stateStore/accounts.js';
import { firstLiveStage } from '../stateStore/liveRepair.js';
import { mapPooled } from '../stateStore/pooled.js';
import { repairBudgetFor } from './repairBudget.js';
import type { PurgeReport } from '../retention/purge.js';
import { retentionSlice } from '../retention/supervisorHook.js';
import { logger, type Logger } from '../observability/logger.js';
import { recordDeadLetters, recordInFlight } from '../observability/orderMetrics.js';
import { activeTelemetry } from '../observability/telemetry.js';
import {
  annotate,
  inSpan,
  linkToActive,
  orderAttributes,
  parentFrom,
  stateFields,
} from '../observability/tracing.js';

/**
 * The Supervisor. It only looks for orders whose CompleteBy has passed and asks for them to be
 * retried (FailureCount + 1, back-off after the soft threshold) or undone (Error, operator
 * alert, compensation at the hard threshold). What a retry or an undo means is the Scheduler's
 * and the Agents' business; the transition function decides, the Supervisor only reports the
 * timeout. Concurrent Supervisors are safe: each action is an ETag-guarded write, so on any one
 * order only one of them succeeds (docs/architecture.md).
 */
export interface SweepReport {
  candidates: number;
  /**
   * Candidates left for a later sweep because the Scheduler has not yet taken in everything sent
   * before their complete-by: the reply they wait for may be queued. Waiting is not failing.
   */
  postponed: number;
  retried: number;
  gaveUp: number;
  alreadyMoved: number;
  failed: number;
  /** Index rows read by the sweep: grows with in-flight orders, not with history. */
  examined: number;
  /** Index rows removed because their order had finished (repair). */
  repaired: number;
  /** In-flight index rows the reconcile re-created (present when a reconcile slice ran). */
  reconciled?: number;
  /** Orders the reconcile entered into the state index. */
  reindexed?: number;
  /** State index groups the reconcile removed (no state row confirms them). */
  unlisted?: number;
  /** The repair pass this run started, if it started one. */
  repairStarted?: RepairPass;
  /** The retention purge slice this run ran, if one was due (shared/retention/). */
  purge?: PurgeReport;
}

/**
 * Repairs both indexes (StateStore.reconcilePage): O(history), so a pass is spread over runs, one
 * bounded slice per run, resuming from the cursor the last slice saved. Which pass is due comes
 * from the pass times kept with the cursor (domain/repairPasses.ts), whatever minute this run
 * landed in. It runs after the sweep has acted, so a large table never delays a retry.
 */
async function reconcileSlice(
  deps: Dependencies,
  options: SupervisorOptions,
  log: Logger,
): Promise<Pick<SweepReport, 'reconciled' | 'reindexed' | 'unlisted' | 'repairStarted'> | undefined> {
  const requested: RepairPass | undefined =
    options.reconcile === 'full' ? 'full' : options.reconcile ? 'hourly' : undefined;
  const now = deps.clock.now();
  // An idle sweep must stay one table request: the ledger is read only when this process does not
  // know it, or what it knows makes a pass due or under way (another instance's start is then seen).
  const known = knownRepairs.get(deps.store);
  if (known && decideRepair(known, now, options.repairs, requested) === 'idle') return undefined;
  const ledger = deps.store.index.repairs;
  const { cursor: saved, record, etag } = await ledger.read();
  const decision = decideRepair(record, now, options.repairs, requested);
  if (decision === 'idle') {
    knownRepairs.set(deps.store, record);
    return undefined;
  }
  let cursor: ReconcileCursor | null = saved;
  let next = record;
  if (decision !== 'continue') {
    if (record.underWay) log.warn('a full repair pass replaces the hourly pass under way', {});
    else log.info('repair pass started', { pass: decision.start });
    cursor =
      passReads(decision.start, record) === 'in-flight'
        ? { stage: firstLiveStage }
        : { stage: 'orders', ...(decision.start === 'full' ? { full: true } : {}) };
    next = passStarted(record, decision.start, now);
  }
  const budget = repairBudgetFor(cursor?.full === true);
  const pageSize = options.reconcilePageSize ?? budget.pageSize;
  const pages = options.reconcilePagesPerRun ?? budget.pagesPerRun;
  // Wall time, not the domain clock: this bounds the run's own duration.
  const budgetEnds = Date.now() + budget.budgetMs;
  const done = {
    reconciled: 0,
    reindexed: 0,
    unlisted: 0,
    ...(decision !== 'continue' ? { repairStarted: decision.start } : {}),
  };
  for (let page = 0; cursor && page < pages && Date.now() < budgetEnds; page++) {
    const result = await deps.store.reconcilePage(cursor, pageSize);
    done.reconciled += result.recreated;
    done.reindexed += result.reindexed;
    done.unlisted += result.unlisted;
    next = passRead(next, result.legacy ?? 0);
    cursor = result.next;
  }
  const after = cursor ? next : passEnded(next);
  // Lost to another Supervisor that moved the pass meanwhile: its save stands; read it next run.
  if (await ledger.save(cursor, after, etag)) knownRepairs.set(deps.store, after);
  else knownRepairs.delete(deps.store);
  return done;
}

/** Per state store: the repair ledger as this process last read or wrote it (absent: not known). */
const knownRepairs = new WeakMap<object, RepairRecord>();

/** The ids each watched queue held at the last peek, and when one of them last left it. */
const progress = new Map<string, { ids: Set<string>; since: number }>();

/**
 * Whether a queue is consumed: empty, or some message seen waiting at an earlier peek has left it
 * within a claim timeout. Nothing leaving means no consumer takes messages (all down, or
 * disconnected): the Supervisor then acts on timeouts as usual rather than wait forever. Not the
 * head alone: one slow invocation holds the head while the consumer drains everything behind it.
 */
function isMoving(deps: Dependencies, queue: string, ids: Set<string>): boolean {
  const now = deps.clock.now().getTime();
  if (ids.size === 0) {
    progress.delete(queue);
    return true;
  }
  const seen = progress.get(queue);
  const left = seen === undefined || [...seen.ids].some((id) => !ids.has(id));
  const since = left ? now : seen.since;
  progress.set(queue, { ids, since });
  return now - since <= deps.policy.claimTimeoutSeconds * 1000;
}

/** One peek of a queue as the domain's view, or undefined when it cannot be known. */
async function viewOf(
  deps: Dependencies,
  queue: string,
  backlog: QueueBacklog,
  log: Logger,
): Promise<(QueueView & { oldest?: Date }) | undefined> {
  let snapshot;
  try {
    snapshot = await backlog.snapshot();
  } catch (e) {
    // Not knowing must not stop the Supervisor: it acts as if nothing waited.
    log.warn('queue backlog unknown; sweeping without it', { queue, error: (e as Error).message });
    return undefined;
  }
  const moving = isMoving(deps, queue, snapshot.messageIds);
  if (!moving)
    log.warn('a queue is not being consumed; timeouts are not postponed for it', {
      queue,
      oldestWaiting: snapshot.oldest?.enqueuedAt.toISOString(),
    });
  return {
    waiting: snapshot.messageIds,
    complete: snapshot.complete,
    moving,
    oldest: snapshot.oldest?.enqueuedAt,
  };
}

/**
 * The Agents' queues, then the scheduler queue, in that order: a request gone from its Agent's
 * queue was settled after its not-started reply was sent, so that reply is in the scheduler queue
 * peeked next, or already applied.
 */
async function queueViews(deps: Dependencies, log: Logger) {
  const agents = new Map<string, QueueView>();
  if (deps.agentBacklog) {
    const names = [...new Set(deps.workflows.all.flatMap((w) => w.steps.map((s) => s.agentQueue)))];
    const views = await Promise.all(names.map((q) => viewOf(deps, q, deps.agentBacklog!(q), log)));
    names.forEach((q, i) => {
      const v = views[i];
      if (v) agents.set(q, v);
    });
  }
  const scheduler = deps.schedulerBacklog
    ? await viewOf(deps, queues.scheduler, deps.schedulerBacklog, log)
    : undefined;
  return { agents, scheduler };
}

/** When this process last sampled the gauges (wall time). */
let gaugesSampledAt = Number.NEGATIVE_INFINITY;

/**
 * In-flight count, oldest in-flight age and dead letters per entity, sampled by the sweep when
 * metrics are exported, and no more often than they are exported.
 */
async function recordGauges(deps: Dependencies, log: Logger): Promise<void> {
  const telemetry = activeTelemetry();
  if (!telemetry.enabled || Date.now() - gaugesSampledAt < telemetry.metricsIntervalMs) return;
  gaugesSampledAt = Date.now();
  try {
    const { count, oldestPutAt } = await inFlightSummary(deps.store);
    const age = oldestPutAt ? Math.max(0, (deps.clock.now().getTime() - oldestPutAt.getTime()) / 1000) : 0;
    recordInFlight(count, Math.round(age));
  } catch (e) {
    log.warn('could not count in-flight orders for the metrics', { error: (e as Error).message });
  }
  if (!deps.deadLetters) return;
  try {
    for (const source of deadLetterSourceList) {
      recordDeadLetters(source.name, (await deps.deadLetters.count(source)).count);
    }
  } catch (e) {
    log.warn('could not count dead letters for the metrics', { error: (e as Error).message });
  }
}

export interface SupervisorOptions {
  /** Orders acted on at once. */
  concurrency?: number;
  /**
   * When the repair passes are due (the Supervisor function passes the product's); without it
   * a pass starts only when asked for with `reconcile`. One under way continues regardless.
   */
  repairs?: RepairSchedule;
  /**
   * Ask for a pass of the O(history) index reconciliation now; `full` also checks every order's
   * state index entry and every entry's order (daily by the schedule).
   */
  reconcile?: boolean | 'full';
  /** State rows per reconcile page (default 1,000). */
  reconcilePageSize?: number;
  /** Reconcile pages per run (default 5, and at most 5 s). */
  reconcilePagesPerRun?: number;
  /** Seconds between runs, which sizes a purge slice at the purge rate (default 30). */
  runIntervalSeconds?: number;
}

export async function runSupervisor(
  deps: Dependencies,
  context: InvocationContext,
  options: SupervisorOptions = {},
): Promise<SweepReport> {
  const log = logger(context, { actor: 'supervisor' });
  const report: SweepReport = {
    candidates: 0,
    postponed: 0,
    examined: 0,
    repaired: 0,
    retried: 0,
    gaveUp: 0,
    alreadyMoved: 0,
    failed: 0,
  };
  const sweep = await sweepEveryAccount(deps.store, deps.clock.now());
  report.candidates = sweep.timedOut.length;
  report.examined = sweep.examined;
  report.repaired = sweep.removed;

  const views =
    sweep.timedOut.length > 0
      ? await queueViews(deps, log)
      : { agents: new Map<string, QueueView>(), scheduler: undefined };
  // A complete-by at or after the scheduler queue's head may have its reply queued behind it.
  const waitingSince = views.scheduler?.moving ? views.scheduler.oldest : undefined;
  const due = sweep.timedOut.filter(
    (c) => waitingSince === undefined || c.completeBy.getTime() < waitingSince.getTime(),
  );
  report.postponed = sweep.timedOut.length - due.length;
  if (report.postponed > 0)
    log.info('timeouts postponed: the Scheduler has not caught up', {
      postponed: report.postponed,
      oldestWaiting: waitingSince?.toISOString(),
    });
  /** The step's request was never picked up in time: the Agent's not-started reply decides. */
  const awaitsAgent = async (orderId: string): Promise<boolean> => {
    if (views.agents.size === 0) return false;
    const stored = await deps.store.load(orderId);
    const request = stored && outstandingRequest(deps.workflows, stored.state);
    if (!request) return false;
    return awaitsNotStarted(request.messageId, views.agents.get(request.agentQueue), views.scheduler);
  };
  const sweepLink = linkToActive({ 'order.link': 'supervisor-sweep' });
  await mapPooled(
    due.map((c) => c.orderId),
    Math.max(1, options.concurrency ?? 8),
    async (orderId) => {
      try {
        if (await awaitsAgent(orderId)) {
          report.postponed += 1;
          log.info("timeout postponed: the request waits unread in a busy Agent's queue", { orderId });
          return;
        }
        // Its history entry names the order's trace (from its submission), not this sweep's.
        const result = await applyEvent(deps, orderId, { type: 'TimedOut' }, undefined, {
          historyInOrderTrace: true,
        });
        if (result.kind !== 'applied') {
          report.alreadyMoved += 1;
          return;
        }
        const { state } = result;
        const startedAt = deps.clock.now();
        if (state.processState === 'Pending') report.retried += 1;
        else report.gaveUp += 1;
        log.warn(
          state.processState === 'Pending' ? 'complete-by passed; retrying' : 'complete-by passed; giving up',
          {
            orderId,
            // The step that ran out of time, and its attempt.
            ...outstandingStep(result.before.state),
            failureCount: state.failureCount,
            processState: state.processState,
            scheduledFor: state.scheduledFor?.toISOString(),
          },
        );
        // The retry or the undo belongs to the order's trace (from its submission), linked to
        // this sweep; the messages sent here carry it to the Scheduler and the Agents.
        await inSpan(
          'supervisor timeout',
          {
            links: sweepLink,
            startTime: startedAt,
            attributes: orderAttributes({
              ...stateFields(result.before.state),
              ...outstandingStep(result.before.state),
              outcome: state.processState,
            }),
          },
          () => carryOut(deps, result.commands, result.before.order, deps.clock.now(), log.with({ orderId })),
          parentFrom({ traceParent: result.before.traceParent }),
        );
      } catch (e) {
        // One bad order must not stop the sweep; the next sweep sees it again.
        report.failed += 1;
        log.error('supervisor could not act on order', { orderId, error: (e as Error).message });
      }
    },
  );
  try {
    const repaired = await reconcileSlice(deps, options, log);
    if (repaired !== undefined) Object.assign(report, repaired);
    if (repaired?.reconciled) log.warn('in-flight index repaired', { recreated: repaired.reconciled });
    if (repaired?.reindexed || repaired?.unlisted) log.warn('state index repaired', { ...repaired });
  } catch (e) {
    // The next run resumes from the last saved cursor.
    log.error('index reconcile failed', { error: (e as Error).message });
  }
  const purge = await retentionSlice(deps, log, options.runIntervalSeconds);
  if (purge) report.purge = purge;
  if (report.candidates > 0 || report.failed > 0) log.info('sweep done', { ...report });
  annotate({ outcome: `retried ${report.retried}, gave up ${report.gaveUp}, postponed ${report.postponed}` });
  await recordGauges(deps, log);
  return report;
}
