import type { Dependencies } from '../app/ports.js';
import type { Logger } from '../observability/logger.js';
import type { PurgeReport } from './purge.js';

/**
 * The Supervisor's retention step: one purge slice when due, after the sweep and the repair, so a
 * purge never delays a retry. A failure is logged; the next run resumes from the markers.
 */
export async function retentionSlice(
  deps: Dependencies,
  log: Logger,
  runIntervalSeconds = 30,
): Promise<PurgeReport | undefined> {
  if (!deps.retention) return undefined;
  try {
    const report = await deps.retention.purgeDue(deps.clock.now(), runIntervalSeconds);
    if (report && (report.purged > 0 || report.resumed > 0 || report.tombstonesExpired > 0)) {
      log.info('retention purge slice', { ...report });
    }
    return report;
  } catch (e) {
    log.error('retention purge failed; the next run resumes it', { error: (e as Error).message });
    return undefined;
  }
}
