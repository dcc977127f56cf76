import { makePolicy, orderWorkflow, systemClock } from '../domain/index.js';
import { settings, type Settings } from '../config/settings.js';
import { ServiceBusMessageBus } from '../messaging/bus.js';
import { StateStore } from '../stateStore/index.js';
import { ServiceHealthTable } from '../stateStore/serviceHealthTable.js';
import { ServiceOutageWatch, type OutageWatch } from '../agents/outageWatch.js';
import type { Dependencies } from './ports.js';

/**
 * The composition root: one set of clients per process, built on first use from the validated
 * settings. Functions call `dependencies()`; tests build their own Dependencies instead.
 */
let current: Promise<Dependencies> | undefined;

export function policyFrom(s: Settings) {
  return makePolicy({
    stepTimeoutSeconds: s.stepTimeoutSeconds,
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
  return {
    store: await StateStore.open(s.stateStore),
    bus: ServiceBusMessageBus.fromConnection(s.serviceBus),
    clock: systemClock,
    policy: policyFrom(s),
    workflow: orderWorkflow,
  };
}

let outages: Promise<OutageWatch> | undefined;

/** The Agents' outage alarm, on the state store's account and the app's bus. */
export function outageWatch(): Promise<OutageWatch> {
  outages ??= (async () => {
    const s = settings();
    const [deps, table] = await Promise.all([dependencies(), ServiceHealthTable.open(s.stateStore)]);
    return new ServiceOutageWatch(table, deps.bus, deps.clock, { threshold: s.serviceOutageAlertThreshold });
  })().catch((e) => {
    outages = undefined;
    throw e;
  });
  return outages;
}
