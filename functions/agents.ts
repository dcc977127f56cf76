import { app, type InvocationContext } from '@azure/functions';
import { settings } from '../shared/config/settings.js';
import { dependencies, outageWatch } from '../shared/app/runtime.js';
import { handleAgentRequest } from '../shared/agents/agent.js';
import {
  completionOf,
  orderWorkflowVersions,
  stepTimeoutSeconds,
  type OrderStep,
} from '../shared/domain/index.js';
import { agentKey, serviceBusConnectionSetting } from '../shared/messaging/entities.js';
import { loadCallBudgetSettings } from '../shared/config/callLimits.js';
import { callBudgets } from '../shared/app/callBudgets.js';

settings();

/**
 * One Agent per Agent name the declared steps use, each wrapping its remote service: its queue, its function name
 * (`paymentAgent`), its service URL, its refusals, its complete-by and its retries all come from
 * the step's declaration in shared/domain/orderWorkflow.ts.
 */
function agentFor(step: OrderStep) {
  return async (message: unknown, context: InvocationContext): Promise<void> => {
    const deps = await dependencies();
    await handleAgentRequest(
      {
        bus: deps.bus,
        clock: deps.clock,
        serviceUrl: settings().remoteServices[step.agent],
        refusals: step.refusals,
        service: step.agent,
        outages: outageWatch(deps),
        callPolicy: step.retry,
        stepTimeoutSeconds: stepTimeoutSeconds(step, deps.policy.stepTimeoutSeconds),
        budget: callBudgets(deps.clock, budgetSettings).gate(step.agent),
      },
      step.agentQueue,
      message,
      context,
    );
  };
}

// One function per Agent of every held version: a step that shares its Agent with another (same
// configuration, workflow.ts checks it) shares its queue and function.
const served = new Map<string, OrderStep>();
for (const workflow of orderWorkflowVersions.all) {
  for (const step of workflow.steps) {
    // An approval step calls no Agent: an operator decides it (functions/approval.ts).
    if (completionOf(step) === 'approval') continue;
    if (!served.has(step.agent)) served.set(step.agent, step as OrderStep);
  }
}
// Each Agent's global call limits: declared with its step, overridden by settings; checked now.
const budgetSettings = loadCallBudgetSettings(
  Object.fromEntries([...served.values()].map((s) => [s.agent, 'limits' in s ? s.limits : undefined])),
);
for (const step of served.values()) {
  app.serviceBusQueue(agentKey(step.agent), {
    connection: serviceBusConnectionSetting,
    queueName: step.agentQueue,
    handler: agentFor(step),
  });
}
