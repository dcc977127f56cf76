import { orderWorkflow, type OrderAgentName } from '../domain/orderWorkflow.js';

/** `fraud-check` → `fraudCheck`: the key of an Agent's queue here and the stem of its function name. */
type Camel<S extends string> = S extends `${infer Head}-${infer Tail}`
  ? `${Head}${Capitalize<Camel<Tail>>}`
  : S;

export function camelCase<S extends string>(name: S): Camel<S> {
  return name.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase()) as Camel<S>;
}

/** The key of an Agent's queue in `queues`, and its function's name: `paymentAgent`. */
export function agentKey<S extends string>(agent: S): `${Camel<S>}Agent` {
  return `${camelCase(agent)}Agent`;
}

/** One queue per Agent, each wrapping one remote service: derived from the workflow's steps. */
const agentQueues = Object.fromEntries(orderWorkflow.steps.map((s) => [agentKey(s.agent), s.agentQueue])) as {
  readonly [A in OrderAgentName as `${Camel<A>}Agent`]: string;
};

/**
 * Names of the Service Bus entities the app uses. The same names are declared in
 * infra/servicebus-emulator/Config.json (local) and infra/app/servicebus.bicep (Azure);
 * test/infra/drift.test.ts keeps them in step (and names what to add for a new step).
 */
export const queues = {
  /** Work for the Scheduler: start or resume an order, agent replies, compensation requests. */
  scheduler: 'scheduler',
  ...agentQueues,
  /** Alerts for a human operator (orders that ended in Error). */
  operatorAlerts: 'operator-alerts',
  /**
   * Poison messages, quarantined on their first delivery and dead-lettered here at once with the
   * reason (shared/messaging/quarantine.ts). Nothing consumes it; operators read its dead letters.
   */
  poison: 'poison',
} as const;

/**
 * The waiting queue of an Agent's service (issue 26): a request that cannot get a call slot waits
 * here, not in its Agent's queue. No trigger listens on it: an instance whose call slot is free
 * pulls the next request from it (shared/agents/pullWaiting.ts), so a freed slot is fed at once
 * instead of by random redelivery, and nothing is held while a request waits.
 */
export function waitingQueueOf(agentQueue: string): string {
  return `${agentQueue}-waiting`;
}

/** Every Agent's waiting queue (Config.json and the Bicep declare them; drift.test.ts checks). */
export const waitingQueues: readonly string[] = Object.values(agentQueues).map(waitingQueueOf);

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
