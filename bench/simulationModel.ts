import {
  ceilings,
  familyOf,
  type Ceiling,
  type ClockLoad,
  type Deployment,
  type Layout,
  type OrderLoad,
} from './capacityModel.js';
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
  clock: ClockLoad = {},
): Ceiling[] {
  return ceilings(load, d, limits, layout, clock).filter((c) => {
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

/**
 * The clock-driven load measured at rest on the run's deployment, as the model takes it: the
 * busiest account's requests per second, the busiest partition of each OrderIndex family, and
 * the namespace's credits.
 */
export function clockLoadAtRest(
  accounts: Readonly<Record<string, { requests: number }>>,
  indexPartitions: Readonly<Record<string, number>>,
  creditsPerSecond: number,
): ClockLoad {
  const families: Record<string, number> = {};
  for (const [p, v] of Object.entries(indexPartitions)) {
    const key = `OrderIndex/${familyOf(p)}`;
    families[key] = Math.max(families[key] ?? 0, v);
  }
  return {
    accountRequestsPerSecond: Math.max(0, ...Object.values(accounts).map((a) => a.requests)),
    partitionEntitiesPerSecond: families,
    namespaceCreditsPerSecond: creditsPerSecond,
  };
}
