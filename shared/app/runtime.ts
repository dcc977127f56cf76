import { makePolicy, orderWorkflow, systemClock } from '../domain/index.js';
import { settings, type Settings } from '../config/settings.js';
import { ServiceBusMessageBus } from '../messaging/bus.js';
import { createOrderStore } from './orderStore.js';
import type { Dependencies } from './ports.js';

/**
 * The composition root: one set of clients per process, built on first use from the validated
 * settings. Functions call `dependencies()`; tests build their own Dependencies instead.
 */
let current: Dependencies | undefined;

export function policyFrom(s: Settings) {
  return makePolicy({
    stepTimeoutSeconds: s.stepTimeoutSeconds,
    failureSoftThreshold: s.failureSoftThreshold,
    failureHardThreshold: s.failureHardThreshold,
    extendedBackoffSeconds: s.extendedBackoffSeconds,
  });
}

export function dependencies(): Dependencies {
  if (!current) {
    const s = settings();
    current = {
      store: createOrderStore(s.stateStore),
      bus: ServiceBusMessageBus.fromConnection(s.serviceBus),
      clock: systemClock,
      policy: policyFrom(s),
      workflow: orderWorkflow,
    };
  }
  return current;
}
