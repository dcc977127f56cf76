import { queues } from '../messaging/entities.js';
import { defineWorkflow } from './workflow.js';

/**
 * How an order is processed: reserve stock, take payment, ship. If the order has to be undone,
 * the completed steps are compensated in reverse order: cancel the shipment, refund, release.
 */
export const orderWorkflow = defineWorkflow({
  name: 'order',
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
