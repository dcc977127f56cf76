import { app, type InvocationContext, type Timer } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { runSupervisor } from '../shared/supervisor/supervisor.js';
import { defaultRepairSchedule } from '../shared/domain/index.js';

settings();

/** The Supervisor: finds orders whose complete-by passed and has them retried or undone. */
export async function supervisor(_timer: Timer, context: InvocationContext): Promise<void> {
  const deps = await dependencies();
  // The index repair reads every state row: hourly, and a full pass daily at 03:00 UTC, each
  // started by the first run after it is due, whatever the schedule (domain/repairPasses.ts).
  await runSupervisor(deps, context, { repairs: defaultRepairSchedule });
}

app.timer('supervisor', {
  // The value, not `%SUPERVISOR_SCHEDULE%`: the host cannot index a setting expression whose
  // setting is unset, and the setting has a documented default (settings.ts checks it, too).
  schedule: settings().supervisorSchedule,
  handler: supervisor,
});
