import {
  completionOf,
  CustomerIntake,
  makePolicy,
  orderWorkflowVersions,
  startingOn,
  systemClock,
  type WorkflowVersions,
} from '../domain/index.js';
import { loadWaitingSettings, waitingSettings } from '../config/waitingSettings.js';
import { settings, type Settings } from '../config/settings.js';
import { ServiceBusMessageBus } from '../messaging/bus.js';
import { openOrderStore } from '../stateStore/index.js';
import { ServiceBusQueueBacklog } from '../messaging/backlog.js';
import { schedulerIntakeGauge } from '../messaging/intakeGauge.js';
import { ServiceBusDeadLetters } from '../messaging/deadLetters.js';
import { queues } from '../messaging/entities.js';
import { ServiceHealthTable } from '../stateStore/serviceHealthTable.js';
import { ServiceOutageWatch, type OutageWatch } from '../agents/outageWatch.js';
import type { Dependencies } from './ports.js';
import { RetentionAccounts } from '../retention/retentionAccounts.js';
import { anyLiveWork, inProcessLiveWork, serviceBusLiveWork } from '../retention/liveWork.js';
import { SubmissionLine, submissionLineWaiting } from '../http/submissionLine.js';

/**
 * The composition root: one set of clients per process, built on first use from the validated
 * settings. Functions call `dependencies()`; tests build their own Dependencies instead.
 */
let current: Promise<Dependencies> | undefined;

/** The workflow versions this process holds: the product's, unless a test app chose others. */
let heldVersions: WorkflowVersions = orderWorkflowVersions;

/**
 * Chooses the workflow versions this process holds, before its first invocation. Only test apps
 * call it (chaos/versionedApp.ts deploys `order@2` next to `order@1`); the product holds
 * `orderWorkflowVersions`, and a new version is deployed by adding it there.
 */
export function holdWorkflowVersions(versions: WorkflowVersions): void {
  if (current) throw new Error('the workflow versions are fixed once the dependencies are built');
  heldVersions = versions;
}

export function policyFrom(s: Settings) {
  return makePolicy({
    stepTimeoutSeconds: s.stepTimeoutSeconds,
    claimTimeoutSeconds: s.claimTimeoutSeconds,
    failureSoftThreshold: s.failureSoftThreshold,
    failureHardThreshold: s.failureHardThreshold,
    extendedBackoffSeconds: s.extendedBackoffSeconds,
  });
}

export function dependencies(): Promise<Dependencies> {
  current ??= create(settings()).catch((e) => {
    current = undefined; // a storage outage at start-up must not poison the process
    throw e;
  });
  return current;
}

async function create(s: Settings): Promise<Dependencies> {
  const bus = ServiceBusMessageBus.fromConnection(s.serviceBus);
  const store = await openOrderStore(s, {
    // An unlimited functionTimeout (dedicated plans) still gets a finite grace: a day.
    indexGraceSeconds: Math.min(s.functionTimeoutSeconds ?? 600, 86_400),
    indexRecheckSeconds: Math.min(s.stepTimeoutSeconds, s.claimTimeoutSeconds),
    stateIndexPartitions: s.orderIndexPartitions,
  });
  return {
    store,
    retention: await RetentionAccounts.open(
      store,
      s.stateStoreAccounts,
      s.retention,
      s.retention.archiveConnection,
      // The purge gives way to live orders: this host's own, and the queues' (other instances').
      anyLiveWork(inProcessLiveWork, serviceBusLiveWork(bus.client)),
    ),
    bus,
    schedulerBacklog: new ServiceBusQueueBacklog(bus.client, queues.scheduler),
    door: {
      limitSeconds: s.admissionBacklogLimitSeconds,
      intake: schedulerIntakeGauge(bus.client),
    },
    // Deeper than the scheduler's: a burst can queue thousands of requests at one Agent.
    agentBacklog: (queue) => new ServiceBusQueueBacklog(bus.client, queue, 20),
    deadLetters: new ServiceBusDeadLetters(bus.client),
    clock: systemClock,
    policy: policyFrom(s),
    workflows: newOrderVersions(),
    statusEvents: s.statusEvents,
    operatorBulkRatePerSecond: s.operatorBulkRatePerSecond,
    ...(s.customerSubmissionsAtOnce > 0
      ? { submissionLine: new SubmissionLine(s.customerSubmissionsAtOnce, submissionLineWaiting) }
      : {}),
    ...(s.customerIntakePerSecond > 0
      ? {
          customerIntake: {
            book: new CustomerIntake(s.customerIntakePerSecond),
            maxDelaySeconds: s.customerIntakeMaxWaitSeconds,
          },
        }
      : {}),
  };
}

/**
 * The held versions, new orders starting on NEW_ORDER_WORKFLOW_VERSION. The product defaults to
 * version 1 until the setting turns version 2 on (waiting steps need CALLBACK_SIGNING_KEYS); a
 * test app that chose its versions starts on their latest unless the setting says otherwise.
 */
function newOrderVersions(): WorkflowVersions {
  const probe = loadWaitingSettings(process.env);
  const start =
    probe.newOrderVersion ?? (heldVersions === orderWorkflowVersions ? 1 : heldVersions.latest.version);
  const versions = startingOn(heldVersions, start);
  // Validated here, at start-up, naming the setting: a callback needs its signing key.
  waitingSettings(versions.latest.steps.some((s) => completionOf(s) === 'callback'));
  return versions;
}

let outages: OutageWatch | undefined;

/**
 * The Agents' outage alarm, on the state store's account and the app's bus. Returned at once: the
 * table opens in the background, so a cold Agent calls its service without waiting for it.
 */
export function outageWatch(deps: Dependencies): OutageWatch {
  if (!outages) {
    const s = settings();
    const table = ServiceHealthTable.open(s.stateStore);
    // A failed open is retried by the next invocation (the Agent only logs health errors).
    table.catch(() => {
      outages = undefined;
    });
    outages = new ServiceOutageWatch(table, deps.bus, deps.clock, {
      threshold: s.serviceOutageAlertThreshold,
    });
  }
  return outages;
}
