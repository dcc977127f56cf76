import type { RefusalDeclaration } from './refusals.js';
import { defineWorkflow } from './workflow.js';
import { startingOn, workflowVersions } from './workflowVersions.js';

/**
 * The answers the demo services give for a business "no" (see refusals.ts): 422 for a refusal
 * and 409 `tombstoned` for an action that arrives after its undo. Their other 409
 * (`key-conflict`: one key, two orders) is our bug, not the customer's, so it stalls and alerts
 * like a 401 does.
 */
const demoServiceRefusals: RefusalDeclaration = {
  statuses: [422],
  problemTypes: ['urn:order-processing:problem:tombstoned'],
};

/**
 * How an order is processed: reserve stock, take payment, ship. If the order has to be undone,
 * the completed steps are compensated in reverse order: cancel the shipment, refund, release.
 * Each step is declared here once: the Agents, their queues (shared/messaging/entities.ts), their
 * functions (functions/agents.ts), their service URL settings and the local stack follow from it;
 * test/infra/drift.test.ts names what to add to infra/ and the sample settings for a new one.
 */
export const orderWorkflow = defineWorkflow({
  name: 'order',
  version: 1,
  steps: [
    {
      name: 'inventory',
      agent: 'inventory',
      action: 'reserve',
      compensation: 'release',
      refusals: demoServiceRefusals,
    },
    {
      name: 'payment',
      agent: 'payment',
      action: 'charge',
      compensation: 'refund',
      refusals: demoServiceRefusals,
    },
    {
      name: 'shipping',
      agent: 'shipping',
      action: 'create-shipment',
      compensation: 'cancel-shipment',
      refusals: demoServiceRefusals,
    },
  ],
});

/**
 * Version 2 (issue 25): orders above an amount wait for an operator's approval before payment,
 * and payment confirms later by webhook (the service answers 202 and calls back). Orders on
 * version 1 finish on version 1. Inventory and shipping are version 1's steps unchanged.
 */
export const orderWorkflowV2 = defineWorkflow({
  name: 'order',
  version: 2,
  steps: [
    orderWorkflow.steps[0],
    {
      name: 'approval',
      // No Agent is called: an operator decides (POST /api/orders/{id}/approval).
      agent: 'operator',
      action: 'approve',
      compensation: null,
      refusals: demoServiceRefusals,
      completion: 'approval',
      wait: { completeBySeconds: 24 * 3600 },
      approval: { aboveAmount: 1000, escalateBeforeSeconds: 3600, atCompleteBy: 'refuse' },
    },
    {
      name: 'payment',
      agent: 'payment',
      action: 'charge',
      compensation: 'refund',
      refusals: demoServiceRefusals,
      completion: 'callback',
      // The provider confirms within the hour, or keeps the step alive by heartbeats for up to 6 h.
      wait: { completeBySeconds: 3600, heartbeat: { intervalSeconds: 900, maxSeconds: 6 * 3600 } },
    },
    orderWorkflow.steps[2],
  ],
});

/**
 * The versions this app holds. A changed process is added as `version: 2` next to version 1, and
 * version 1 is removed once no order on it is in flight (docs/architecture.md). New orders start
 * on version 1 until NEW_ORDER_WORKFLOW_VERSION switches version 2 on (its callback step needs
 * CALLBACK_SIGNING_KEYS); every held version finishes its own orders either way.
 */
export const orderWorkflowVersions = startingOn(workflowVersions(orderWorkflow, orderWorkflowV2), 1);

export type OrderStep = (typeof orderWorkflow.steps)[number];
/** The Agents of the order workflow, by name (`inventory`, ...). */
export type OrderAgentName = OrderStep['agent'];

/** The refusal declaration of each step, by step name (for tests and tools). */
export const orderRefusals = Object.fromEntries(
  orderWorkflow.steps.map((s) => [s.name, s.refusals]),
) as Record<OrderStep['name'], RefusalDeclaration>;
