import { app, type InvocationContext, type Timer } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { runSupervisor } from '../shared/supervisor/supervisor.js';

settings();

/** Hours whose reconciliation already ran in this process (see shouldReconcile). */
const reconciledHours = new Set<number>();

/**
 * The index repair reads every state row, so a pass starts at most once an hour per instance (the
 * first sweep in minute 0 of each UTC hour, not every cold start); the runs after it carry the
 * pass on, a bounded slice each, until it has read the whole table. The pass of 03:00 UTC is a
 * full one: it also checks each order's state index entry and each entry's order, one point read
 * each (StateStore.reconcilePage), which is why it is daily.
 */
function shouldReconcile(now: Date): boolean | 'full' {
  const hour = Math.floor(now.getTime() / 3_600_000);
  if (now.getUTCMinutes() !== 0 || reconciledHours.has(hour)) return false;
  reconciledHours.add(hour);
  return now.getUTCHours() === fullReconcileHourUtc ? 'full' : true;
}

/** The hour (UTC) of the daily full reconcile: a quiet hour for most shops in Europe and America. */
const fullReconcileHourUtc = 3;

/** The Supervisor: finds orders whose complete-by passed and has them retried or undone. */
export async function supervisor(_timer: Timer, context: InvocationContext): Promise<void> {
  const deps = await dependencies();
  await runSupervisor(deps, context, { reconcile: shouldReconcile(deps.clock.now()) });
}

app.timer('supervisor', {
  // The value, not `%SUPERVISOR_SCHEDULE%`: the host cannot index a setting expression whose
  // setting is unset, and the setting has a documented default (settings.ts checks it, too).
  schedule: settings().supervisorSchedule,
  handler: supervisor,
});
