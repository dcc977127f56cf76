import { makePolicy, orderWorkflow, systemClock } from '../domain/index.js';
import { settings, type Settings } from '../config/settings.js';
import { ServiceBusMessageBus } from '../messaging/bus.js';
import { StateStore } from '../stateStore/index.js';
import { ServiceBusQueueBacklog } from '../messaging/backlog.js';
import { queues } from '../messaging/entities.js';
import type { Dependencies } from './ports.js';

/**
 * The composition root: one set of clients per process, built on first use from the validated
 * settings. Functions call `dependencies()`; tests build their own Dependencies instead.
 */
let current: Promise<Dependencies> | undefined;

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
  return {
    store: await StateStore.open(s.stateStore, {
      // An unlimited functionTimeout (dedicated plans) still gets a finite grace: a day.
      indexGraceSeconds: Math.min(s.functionTimeoutSeconds ?? 600, 86_400),
    }),
    bus,
    schedulerBacklog: new ServiceBusQueueBacklog(bus.client, queues.scheduler),
    clock: systemClock,
    policy: policyFrom(s),
    workflow: orderWorkflow,
    statusEvents: s.statusEvents,
  };
}
