import type { Clock, Policy, Workflow } from '../domain/index.js';
import type { StatusEventLevel } from '../domain/statusEvents.js';
import type { MessageBus } from '../messaging/bus.js';
import type { QueueBacklog } from '../messaging/backlog.js';
import type { StateStore } from '../stateStore/index.js';

/** Everything a function needs, built once per process from the settings (see runtime.ts). */
export interface Dependencies {
  store: StateStore;
  bus: MessageBus;
  clock: Clock;
  policy: Policy;
  workflow: Workflow;
  /** Which order-status events are sent; absent means the setting's default, process level. */
  statusEvents?: StatusEventLevel;
  /** The scheduler queue's backlog; without it the Supervisor assumes none (tests, tools). */
  schedulerBacklog?: QueueBacklog;
  /** An Agent queue's backlog, by queue name; without it a request's wait counts as its time. */
  agentBacklog?: (queue: string) => QueueBacklog;
  /** OPERATOR_BULK_RATE_PER_SECOND; absent means its default (20). */
  operatorBulkRatePerSecond?: number;
}
