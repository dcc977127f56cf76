import { app, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies, outageWatch } from '../shared/app/runtime.js';
import { handleAgentRequest } from '../shared/agents/agent.js';
import { orderRefusals } from '../shared/domain/index.js';
import { queues, serviceBusConnectionSetting } from '../shared/messaging/entities.js';

settings();

/** The Agent that wraps the inventory service. */
export async function inventoryAgent(message: unknown, context: InvocationContext): Promise<void> {
  const deps = await dependencies();
  await handleAgentRequest(
    {
      bus: deps.bus,
      clock: deps.clock,
      serviceUrl: settings().remoteServices.inventory,
      refusals: orderRefusals.inventory,
      service: 'inventory',
      outages: outageWatch(deps),
      stepTimeoutSeconds: deps.policy.stepTimeoutSeconds,
    },
    queues.inventoryAgent,
    message,
    context,
  );
}

app.serviceBusQueue('inventoryAgent', {
  connection: serviceBusConnectionSetting,
  queueName: queues.inventoryAgent,
  handler: inventoryAgent,
});
