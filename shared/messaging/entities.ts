/**
 * Names of the Service Bus entities the app uses. The same names are declared in
 * infra/servicebus-emulator/Config.json (local) and infra/app/servicebus.bicep (Azure);
 * a test keeps the three in step.
 */
export const queues = {
  /** Work for the Scheduler: start or resume an order, agent replies, compensation requests. */
  scheduler: 'scheduler',
  /** One queue per Agent, each wrapping one remote service. */
  inventoryAgent: 'agent-inventory',
  paymentAgent: 'agent-payment',
  shippingAgent: 'agent-shipping',
  /** Alerts for a human operator (orders that ended in Error). */
  operatorAlerts: 'operator-alerts',
} as const;

export const topics = {
  /** Status events for client apps: the pattern's private response channel. */
  orderStatus: 'order-status',
} as const;

/**
 * The order-status topic's subscriptions, as infra/servicebus-emulator/Config.json declares them
 * (and the Bicep deploys from it; test/infra/drift.test.ts keeps this list equal to the file's).
 * The app listens on none of them (they are for client apps); it only reads their dead letters.
 */
export const orderStatusSubscriptions = ['all'] as const;

/** The app setting (connection prefix) that names the Service Bus namespace for triggers and clients. */
export const serviceBusConnectionSetting = 'ServiceBusConnection';

/**
 * DuplicateDetectionHistoryTimeWindow of every entity (PT5M in infra/servicebus-emulator/Config.json,
 * which infra/app/servicebus-entities.bicep deploys): a re-send within it is absorbed.
 */
export const duplicateDetectionWindowSeconds = 300;
