import { app, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies, outageWatch } from '../shared/app/runtime.js';
import { handleAgentRequest } from '../shared/agents/agent.js';
import { orderRefusals } from '../shared/domain/index.js';
import { queues, serviceBusConnectionSetting } from '../shared/messaging/entities.js';

settings();

/** The Agent that wraps the shipping service. */
export async function shippingAgent(message: unknown, context: InvocationContext): Promise<void> {
  const deps = await dependencies();
  await handleAgentRequest(
    {
      bus: deps.bus,
      clock: deps.clock,
      serviceUrl: settings().remoteServices.shipping,
      refusals: orderRefusals.shipping,
      service: 'shipping',
      outages: outageWatch(deps),
      stepTimeoutSeconds: deps.policy.stepTimeoutSeconds,
    },
    queues.shippingAgent,
    message,
    context,
  );
}

app.serviceBusQueue('shippingAgent', {
  connection: serviceBusConnectionSetting,
  queueName: queues.shippingAgent,
  handler: shippingAgent,
});
