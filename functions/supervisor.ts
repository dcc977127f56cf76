import { app, type InvocationContext, type Timer } from '@azure/functions';
import { settings, settingNames } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { runSupervisor } from '../shared/supervisor/supervisor.js';

settings();

/** Hours whose reconciliation already ran in this process (see shouldReconcile). */
const reconciledHours = new Set<number>();

/**
 * The in-flight index repair reads every state row, so a pass starts at most once an hour per
 * instance (the first sweep in minute 0 of each UTC hour, not every cold start); the runs after it
 * carry the pass on, a bounded slice each, until it has read the whole table.
 */
function shouldReconcile(now: Date): boolean {
  const hour = Math.floor(now.getTime() / 3_600_000);
  if (now.getUTCMinutes() !== 0 || reconciledHours.has(hour)) return false;
  reconciledHours.add(hour);
  return true;
}

/** The Supervisor: finds orders whose complete-by passed and has them retried or undone. */
export async function supervisor(_timer: Timer, context: InvocationContext): Promise<void> {
  const deps = await dependencies();
  await runSupervisor(deps, context, { reconcile: shouldReconcile(deps.clock.now()) });
}

app.timer('supervisor', {
  schedule: `%${settingNames.supervisorSchedule}%`,
  handler: supervisor,
});
