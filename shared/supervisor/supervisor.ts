import type { InvocationContext } from '@azure/functions';
import { outstandingStep } from '../domain/index.js';
import { applyEvent } from '../app/applyEvent.js';
import type { Dependencies } from '../app/ports.js';
import { withOperatorAlert } from '../app/operatorAlert.js';
import { carryOut } from '../messaging/commandMessages.js';
import { logger, type Logger } from '../observability/logger.js';

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
  reconciled?: number;
}

/** One run's share of a reconcile pass: pages of state rows, and wall time. */
const reconcileDefaults = { pageSize: 1000, pagesPerRun: 5, budgetMs: 5000 };

/**
 * Re-creates lost index rows by scanning the state rows: O(history), so a pass starts rarely and is
 * spread over runs, one bounded slice per run, resuming from the cursor the last slice saved. It
 * runs after the sweep has acted, so a large table never delays a retry.
 */
async function reconcileSlice(
  deps: Dependencies,
  start: boolean,
  options: SupervisorOptions,
): Promise<number | undefined> {
  const cursor = await deps.store.index.reconcileCursor();
  if (cursor === null && !start) return undefined;
  const pageSize = options.reconcilePageSize ?? reconcileDefaults.pageSize;
  const pages = options.reconcilePagesPerRun ?? reconcileDefaults.pagesPerRun;
  // Wall time, not the domain clock: this bounds the run's own duration.
  const budgetEnds = Date.now() + reconcileDefaults.budgetMs;
  let token = cursor?.token;
  let recreated = 0;
  for (let page = 0; page < pages && Date.now() < budgetEnds; page++) {
    const result = await deps.store.index.reconcile({ continuationToken: token, pageSize, maxPages: 1 });
    recreated += result.recreated;
    token = result.continuationToken;
    if (!token) break;
  }
  await deps.store.index.saveReconcileCursor(token ? { token } : 'done');
  return recreated;
}

/** The oldest waiting scheduler message this process saw, and since when it has been the oldest. */
let lastHead: { id: string; since: number } | undefined;

/**
 * When the oldest message still waiting on the scheduler queue was enqueued (undefined: none, or
 * unknown). A complete-by at or after it may have a reply behind it. Only while the Scheduler is
 * consuming: a head that has waited longer than a claim timeout means no Scheduler takes messages
 * (all down, or disconnected), and the Supervisor then acts on timeouts as usual rather than wait
 * forever. Broker time: a broker clock ahead of ours only postpones more; one behind by s seconds
 * can miss replies sent in the last s seconds before a complete-by.
 */
async function schedulerBacklogSince(deps: Dependencies, log: Logger): Promise<Date | undefined> {
  if (!deps.schedulerBacklog) return undefined;
  let head;
  try {
    head = await deps.schedulerBacklog.oldestWaiting();
  } catch (e) {
    // Not knowing must not stop the Supervisor: it acts as if nothing waited.
    log.warn('scheduler backlog unknown; sweeping without it', { error: (e as Error).message });
    return undefined;
  }
  const now = deps.clock.now().getTime();
  if (head === undefined) {
    lastHead = undefined;
    return undefined;
  }
  if (lastHead?.id !== head.id) lastHead = { id: head.id, since: now };
  if (now - lastHead.since > deps.policy.claimTimeoutSeconds * 1000) {
    log.warn('the scheduler queue is not being consumed; timeouts are not postponed', {
      oldestWaiting: head.enqueuedAt.toISOString(),
    });
    return undefined;
  }
  return head.enqueuedAt;
}

export interface SupervisorOptions {
  /** Orders acted on at once. */
  concurrency?: number;
  /** Start a pass of the O(history) index reconciliation (one under way continues regardless). */
  reconcile?: boolean;
  /** State rows per reconcile page (default 1,000). */
  reconcilePageSize?: number;
  /** Reconcile pages per run (default 5, and at most 5 s). */
  reconcilePagesPerRun?: number;
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
  const sweep = await deps.store.index.sweep(deps.clock.now());
  report.candidates = sweep.timedOut.length;
  report.examined = sweep.examined;
  report.repaired = sweep.removed;

  const waitingSince = await schedulerBacklogSince(deps, log);
  const due = sweep.timedOut.filter(
    (c) => waitingSince === undefined || c.completeBy.getTime() < waitingSince.getTime(),
  );
  report.postponed = sweep.timedOut.length - due.length;
  if (report.postponed > 0)
    log.info('timeouts postponed: the Scheduler has not caught up', {
      postponed: report.postponed,
      oldestWaiting: waitingSince?.toISOString(),
    });
  const queue = due.map((c) => c.orderId);
  const worker = async () => {
    for (let orderId = queue.shift(); orderId !== undefined; orderId = queue.shift()) {
      try {
        const result = await applyEvent(deps, orderId, { type: 'TimedOut' });
        if (result.kind !== 'applied') {
          report.alreadyMoved += 1;
          continue;
        }
        const { state } = result;
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
        await carryOut(
          deps,
          withOperatorAlert(result.commands, state),
          result.before.order,
          deps.clock.now(),
          log.with({ orderId }),
        );
      } catch (e) {
        // One bad order must not stop the sweep; the next sweep sees it again.
        report.failed += 1;
        log.error('supervisor could not act on order', { orderId, error: (e as Error).message });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.concurrency ?? 8) }, worker));
  try {
    const reconciled = await reconcileSlice(deps, options.reconcile ?? false, options);
    if (reconciled !== undefined) report.reconciled = reconciled;
    if (reconciled) log.warn('in-flight index repaired', { recreated: reconciled });
  } catch (e) {
    // The next run resumes from the last saved cursor.
    log.error('index reconcile failed', { error: (e as Error).message });
  }
  if (report.candidates > 0 || report.failed > 0) log.info('sweep done', { ...report });
  return report;
}
