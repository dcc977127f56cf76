import { app, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { queues, serviceBusConnectionSetting } from '../shared/messaging/entities.js';
import { handleSchedulerMessage } from '../shared/scheduler/scheduler.js';

settings();

/** The Scheduler: claims orders, dispatches their steps to Agents, applies the Agents' replies. */
export async function scheduler(message: unknown, context: InvocationContext): Promise<void> {
  await handleSchedulerMessage(await dependencies(), message, context);
}

app.serviceBusQueue('scheduler', {
  connection: serviceBusConnectionSetting,
  queueName: queues.scheduler,
  handler: scheduler,
});
