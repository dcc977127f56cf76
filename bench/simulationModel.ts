import { ceilings, type Ceiling, type Deployment, type Layout, type OrderLoad } from './capacityModel.js';
import type { LimitKey, LimitTable } from './limits.js';

/**
 * The capacity model at limits divided by k: what the throttled simulation (bench/simulation.ts)
 * should measure. Pure; test/bench/simulationModel.test.ts.
 */

/** Limits that are rates; counts (messaging units, instances, memory) are not scaled. */
const rates: readonly LimitKey[] = [
  'tablePartitionEntitiesPerSecond',
  'storageAccountRequestsPerSecond',
  'serviceBusStandardCreditsPerSecond',
  'serviceBusPremiumBytesPerSecondPerMessagingUnit',
];

export function scaledLimits(limits: LimitTable, k: number): LimitTable {
  if (!(k > 0)) throw new RangeError(`k must be positive, got ${k}`);
  return {
    ...limits,
    value: (key) => (rates.includes(key) ? limits.value(key) / k : limits.value(key)),
  };
}

/** Which limits a run enforces: the proxies' table limits always, the namespace's credits or not. */
export interface Enforced {
  tables: boolean;
  serviceBusCredits: boolean;
}

/** The ceilings of the resources the run enforces (function instances are this machine's). */
export function enforcedCeilings(
  load: OrderLoad,
  d: Deployment,
  limits: LimitTable,
  layout: Layout,
  enforced: Enforced,
): Ceiling[] {
  return ceilings(load, d, limits, layout).filter((c) => {
    if (c.source === 'tablePartitionEntitiesPerSecond' || c.source === 'storageAccountRequestsPerSecond')
      return enforced.tables;
    if (c.source === 'serviceBusStandardCreditsPerSecond') return enforced.serviceBusCredits;
    return false;
  });
}

/** Measured against predicted: the relative error and whether it is within `tolerance`. */
export function compare(
  predicted: number,
  measured: number,
  tolerance = 0.25,
): { error: number; within: boolean } {
  const error = (measured - predicted) / predicted;
  return { error, within: Math.abs(error) <= tolerance };
}
