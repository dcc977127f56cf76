import { queues } from '../messaging/entities.js';
import type { RefusalDeclaration } from './refusals.js';
import { defineWorkflow } from './workflow.js';
import { workflowVersions } from './workflowVersions.js';

/**
 * How an order is processed: reserve stock, take payment, ship. If the order has to be undone,
 * the completed steps are compensated in reverse order: cancel the shipment, refund, release.
 */
export const orderWorkflow = defineWorkflow({
  name: 'order',
  version: 1,
  steps: [
    { name: 'inventory', agent: queues.inventoryAgent, action: 'reserve', compensation: 'release' },
    { name: 'payment', agent: queues.paymentAgent, action: 'charge', compensation: 'refund' },
    {
      name: 'shipping',
      agent: queues.shippingAgent,
      action: 'create-shipment',
      compensation: 'cancel-shipment',
    },
  ],
});

/**
 * The versions this app holds. A changed process is added as `version: 2` next to version 1, and
 * version 1 is removed once no order on it is in flight (docs/architecture.md).
 */
export const orderWorkflowVersions = workflowVersions(orderWorkflow);

/**
 * The answers each step's service gives for a business "no" (see refusals.ts): the demo
 * services answer 422 for a refusal and 409 `tombstoned` for an action that arrives after its
 * undo. Their other 409 (`key-conflict`: one key, two orders) is our bug, not the customer's, so
 * it stalls and alerts like a 401 does.
 */
const demoServiceRefusals: RefusalDeclaration = {
  statuses: [422],
  problemTypes: ['urn:order-processing:problem:tombstoned'],
};

export const orderRefusals = {
  inventory: demoServiceRefusals,
  payment: demoServiceRefusals,
  shipping: demoServiceRefusals,
} as const satisfies Record<(typeof orderWorkflow.steps)[number]['name'], RefusalDeclaration>;
