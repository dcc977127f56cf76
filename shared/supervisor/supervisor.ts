import type { InvocationContext } from '@azure/functions';
import { applyEvent } from '../app/applyEvent.js';
import type { Dependencies } from '../app/ports.js';
import { carryOut } from '../messaging/commandMessages.js';
import { logger } from '../observability/logger.js';

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
  retried: number;
  gaveUp: number;
  alreadyMoved: number;
  failed: number;
  reconciled?: number;
}

export interface SupervisorOptions {
  /** Orders acted on at once. */
  concurrency?: number;
  /** Run the O(history) index reconciliation on this run. */
  reconcile?: boolean;
}

export async function runSupervisor(
  deps: Dependencies,
  context: InvocationContext,
  options: SupervisorOptions = {},
): Promise<SweepReport> {
  const log = logger(context, { actor: 'supervisor' });
  const report: SweepReport = { candidates: 0, retried: 0, gaveUp: 0, alreadyMoved: 0, failed: 0 };
  if (options.reconcile) {
    report.reconciled = await deps.store.reconcile(deps.clock.now());
    if (report.reconciled > 0) log.warn('in-flight index repaired', { recreated: report.reconciled });
  }
  const expired = await deps.store.sweep(deps.clock.now());
  report.candidates = expired.length;

  const queue = [...expired];
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
            failureCount: state.failureCount,
            processState: state.processState,
            scheduledFor: state.scheduledFor?.toISOString(),
          },
        );
        await carryOut(
          deps.bus,
          result.commands,
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
  if (report.candidates > 0 || report.failed > 0) log.info('sweep done', { ...report });
  return report;
}
