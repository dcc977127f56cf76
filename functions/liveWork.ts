import { app } from '@azure/functions';
import { liveInvocations } from '../shared/retention/liveWork.js';

/**
 * Not a function: counts this process's live invocations (the Scheduler and the Agents, every
 * Service Bus triggered function) while they run, so a retention purge in the same process gives
 * way to them (shared/retention/purgePacer.ts). A counter around the handler: nothing else.
 */
app.hook.preInvocation((hook) => {
  if (hook.invocationContext.options.trigger.type !== 'serviceBusTrigger') return;
  const handler = hook.functionHandler as (...a: unknown[]) => unknown;
  hook.functionHandler = (...args: unknown[]) => liveInvocations.track(() => handler(...args));
});
