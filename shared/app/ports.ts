import type { Clock, CustomerIntake, Policy, WorkflowVersions } from '../domain/index.js';
import type { StatusEventLevel } from '../domain/statusEvents.js';
import type { MessageBus } from '../messaging/bus.js';
import type { QueueBacklog } from '../messaging/backlog.js';
import type { IntakeGauge } from '../messaging/intakeGauge.js';
import type { DeadLetterQueues } from '../messaging/deadLetters.js';
import type { OrderStore } from '../stateStore/index.js';
import type { OrderRetention } from '../retention/retentionAccounts.js';
import type { SubmissionLine } from '../http/submissionLine.js';

/** Everything a function needs, built once per process from the settings (see runtime.ts). */
export interface Dependencies {
  /** One account's StateStore, or the router over several (StateStoreAccounts). */
  store: OrderStore;
  bus: MessageBus;
  clock: Clock;
  policy: Policy;
  /** Every workflow version with orders still in flight; new orders start on the latest. */
  workflows: WorkflowVersions;
  /** Which order-status events are sent; absent means the setting's default, process level. */
  statusEvents?: StatusEventLevel;
  /** The scheduler queue's backlog; without it the Supervisor assumes none (tests, tools). */
  schedulerBacklog?: QueueBacklog;
  /** An Agent queue's backlog, by queue name; without it a request's wait counts as its time. */
  agentBacklog?: (queue: string) => QueueBacklog;
  /**
   * The submission door: new orders are refused (503, Retry-After) while the scheduler queue's
   * oldest waiting message is older than `limitSeconds`. Without it the door is always open.
   */
  door?: { limitSeconds: number; intake: IntakeGauge };
  /**
   * CUSTOMER_INTAKE_PER_SECOND: each customer's orders go to the Scheduler at most this many a
   * second from this instance (domain/customerIntake.ts); the rest wait for their turn, and one
   * whose turn is further out than `maxDelaySeconds` (CUSTOMER_INTAKE_MAX_WAIT_SECONDS) is refused (429). Without it: no pacing.
   */
  customerIntake?: { book: CustomerIntake; maxDelaySeconds: number };
  /**
   * CUSTOMER_SUBMISSIONS_AT_ONCE: each customer's submissions in progress at this instance at
   * once; the rest wait in the customer's line (http/submissionLine.ts). Without it: no line.
   */
  submissionLine?: SubmissionLine;
  /** The dead-letter queues: the operator's dead-letter routes, and the Supervisor's `deadletters` gauge. */
  deadLetters?: DeadLetterQueues;
  /** OPERATOR_BULK_RATE_PER_SECOND; absent means its default (20). */
  operatorBulkRatePerSecond?: number;
  /** Retention: the Supervisor's purge slices, legal holds, purged orders' tombstones and archive. */
  retention?: OrderRetention;
}
