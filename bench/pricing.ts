import { z } from 'zod';

/**
 * Dollars from what the bench counts: operations per order, invocation durations and a price
 * table kept as data (bench/prices.json). Pure, so every rule is unit-tested
 * (test/bench/pricing.test.ts); the bench does the measuring and the reading.
 */

const price = z.object({
  value: z.number().nonnegative(),
  unit: z.string().min(1),
  source: z.url(),
  seenIn: z.string().optional(),
});

export const priceTableSchema = z.object({
  currency: z.literal('USD'),
  region: z.string().min(1),
  read: z.iso.date(),
  hoursPerMonth: z.number().positive(),
  serviceBusStandard: z.object({
    baseChargePerHour: price,
    includedOperationsPerMonth: price,
    operationTiers: z
      .array(
        z.object({
          fromMillions: z.number().nonnegative(),
          toMillions: z.number().positive().nullable(),
          perMillion: price,
        }),
      )
      .min(1),
  }),
  serviceBusPremium: z.object({ perMessagingUnitHour: price, note: z.string().optional() }).optional(),
  tableStorage: z.object({ per10kTransactions: price }),
  /** Block blobs (the order archive): write operations and capacity per access tier. */
  blobStorage: z
    .object({
      hotWritePer10k: price,
      hotReadPer10k: price,
      coolWritePer10k: price,
      hotPerGBMonth: price,
      coolPerGBMonth: price,
    })
    .optional(),
  flexConsumption: z.object({
    instanceSizesMB: z.array(z.number().int().positive()).min(1),
    minimumBillableMs: price,
    roundUpMs: price,
    onDemand: z.object({
      perGBSecond: price,
      perMillionExecutions: price,
      freeGBSecondsPerMonth: price,
      freeExecutionsPerMonth: price,
    }),
    alwaysReady: z.object({
      baselinePerGBSecond: price,
      executionPerGBSecond: price,
      perMillionExecutions: price,
    }),
  }),
});

export type PriceTable = z.infer<typeof priceTableSchema>;

/** Validates the price table; a malformed file fails naming the first bad field. */
export function parsePriceTable(json: unknown): PriceTable {
  const parsed = priceTableSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`price table: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  const tiers = parsed.data.serviceBusStandard.operationTiers;
  const included = parsed.data.serviceBusStandard.includedOperationsPerMonth.value / 1e6;
  if (tiers[0].fromMillions !== included)
    throw new Error(`price table: the first operation tier must start at the included ${included}M`);
  for (let i = 1; i < tiers.length; i++) {
    if (tiers[i].fromMillions !== tiers[i - 1].toMillions)
      throw new Error(`price table: operation tier ${i} must start where tier ${i - 1} ends`);
  }
  if (tiers[tiers.length - 1].toMillions !== null)
    throw new Error('price table: the last operation tier must be open-ended (toMillions null)');
  return parsed.data;
}

/** GB as Flex bills it: MB / 1,024 (its meters divide MB-ms by 1,024,000 to get GB-s). */
export const gigabytes = (memoryMB: number): number => memoryMB / 1024;

/** One activity period of an instance as Flex bills it: at least the minimum, then up in steps. */
export function billedMs(activeMs: number, prices: PriceTable): number {
  if (!(activeMs >= 0)) throw new RangeError(`activeMs must be >= 0, got ${activeMs}`);
  const min = prices.flexConsumption.minimumBillableMs.value;
  const step = prices.flexConsumption.roundUpMs.value;
  return Math.max(min, Math.ceil(activeMs / step) * step);
}

export type Interval = readonly [start: number, end: number];

/** Overlapping or touching executions merge into one period in which the instance is active. */
export function activityPeriods(intervals: readonly Interval[]): Interval[] {
  const sorted = [...intervals].filter(([s, e]) => e >= s).sort((a, b) => a[0] - b[0]);
  const out: Array<[number, number]> = [];
  for (const [s, e] of sorted) {
    const last = out[out.length - 1];
    if (last && s <= last[1]) last[1] = Math.max(last[1], e);
    else out.push([s, e]);
  }
  return out;
}

/** Billed instance time for a set of executions on one instance: each activity period rounded. */
export function billedActivityMs(intervals: readonly Interval[], prices: PriceTable): number {
  return activityPeriods(intervals).reduce((sum, [s, e]) => sum + billedMs(e - s, prices), 0);
}

export interface ServiceBusOps {
  sends: number;
  receives: number;
  settlements: number;
}

export const operations = (sb: ServiceBusOps): number => sb.sends + sb.receives + sb.settlements;

/** A month of Service Bus Standard: the base charge (with its included operations) plus the tiers. */
export function serviceBusMonthly(operationsPerMonth: number, prices: PriceTable): number {
  const sb = prices.serviceBusStandard;
  let dollars = sb.baseChargePerHour.value * prices.hoursPerMonth;
  const millions = operationsPerMonth / 1e6;
  for (const tier of sb.operationTiers) {
    const top = tier.toMillions ?? Number.POSITIVE_INFINITY;
    const inTier = Math.max(0, Math.min(millions, top) - tier.fromMillions);
    dollars += inTier * tier.perMillion.value;
  }
  return dollars;
}

/** What one kind of order does, per order. */
export interface OrderProfile {
  name: string;
  tableTransactions: number;
  serviceBus: ServiceBusOps;
  /** Executions per function. */
  executions: Record<string, number>;
}

/** Invocation durations per function (ms), from the host. */
export type Durations = Record<string, { p50: number; p95: number }>;

export interface PerMillionOrders {
  serviceBus: number;
  table: number;
  executions: number;
  /** Each execution alone on its instance (sparse traffic): min period and rounding per execution. */
  computeSparseP50: number;
  computeSparseP95: number;
  /** Executions overlapping on a busy instance: measured billed instance time per order. */
  computeBusy: number | null;
  totalSparseP50: number;
  totalSparseP95: number;
  totalBusy: number | null;
  /** GB-s per order behind the compute figures. */
  gbSeconds: { sparseP50: number; sparseP95: number; busy: number | null };
}

/**
 * A million orders of one kind, at the marginal rates: Service Bus at the first paid tier (the
 * included 13M operations belong to the base charge, counted at rest) and Flex on demand without
 * the free grant (a per-subscription monthly allowance, shown apart).
 */
export function perMillionOrders(
  order: OrderProfile,
  durations: Durations,
  memoryMB: number,
  prices: PriceTable,
  busyBilledMsPerOrder?: number,
): PerMillionOrders {
  const flex = prices.flexConsumption.onDemand;
  const gb = gigabytes(memoryMB);
  const sparse = (q: 'p50' | 'p95') =>
    Object.entries(order.executions).reduce((sum, [fn, n]) => {
      const d = durations[fn];
      if (!d) throw new Error(`no duration measured for function ${fn}`);
      return sum + (n * billedMs(d[q], prices) * gb) / 1000;
    }, 0);
  const gbP50 = sparse('p50');
  const gbP95 = sparse('p95');
  const gbBusy = busyBilledMsPerOrder === undefined ? null : (busyBilledMsPerOrder * gb) / 1000;
  const million = 1e6;
  const serviceBus =
    operations(order.serviceBus) * prices.serviceBusStandard.operationTiers[0].perMillion.value;
  const table = (order.tableTransactions * million * prices.tableStorage.per10kTransactions.value) / 1e4;
  const executionCount = Object.values(order.executions).reduce((a, b) => a + b, 0);
  const executions = executionCount * flex.perMillionExecutions.value;
  const compute = (gbs: number) => gbs * million * flex.perGBSecond.value;
  const fixed = serviceBus + table + executions;
  return {
    serviceBus,
    table,
    executions,
    computeSparseP50: compute(gbP50),
    computeSparseP95: compute(gbP95),
    computeBusy: gbBusy === null ? null : compute(gbBusy),
    totalSparseP50: fixed + compute(gbP50),
    totalSparseP95: fixed + compute(gbP95),
    totalBusy: gbBusy === null ? null : fixed + compute(gbBusy),
    gbSeconds: { sparseP50: gbP50, sparseP95: gbP95, busy: gbBusy },
  };
}

export interface AtRest {
  supervisorRunsPerMonth: number;
  serviceBusBase: number;
  /** The Supervisor's sweeps, each alone on an instance, before the free grant. */
  supervisorGBSeconds: number;
  supervisorCompute: number;
  supervisorExecutions: number;
  table: number;
  total: number;
  /** The same month after the on-demand free grant (if nothing else in the subscription uses it). */
  totalAfterFreeGrant: number;
}

/** A month with no orders: the Service Bus base charge and the Supervisor's timer. */
export function monthAtRest(
  sweepsPerHour: number,
  sweepMs: number,
  tablePerSweep: number,
  memoryMB: number,
  prices: PriceTable,
): AtRest {
  const flex = prices.flexConsumption.onDemand;
  const runs = sweepsPerHour * prices.hoursPerMonth;
  const gbSeconds = (runs * billedMs(sweepMs, prices) * gigabytes(memoryMB)) / 1000;
  const serviceBusBase = prices.serviceBusStandard.baseChargePerHour.value * prices.hoursPerMonth;
  const supervisorCompute = gbSeconds * flex.perGBSecond.value;
  const supervisorExecutions = (runs / 1e6) * flex.perMillionExecutions.value;
  const table = (runs * tablePerSweep * prices.tableStorage.per10kTransactions.value) / 1e4;
  const afterGrant =
    Math.max(0, gbSeconds - flex.freeGBSecondsPerMonth.value) * flex.perGBSecond.value +
    (Math.max(0, runs - flex.freeExecutionsPerMonth.value) / 1e6) * flex.perMillionExecutions.value;
  return {
    supervisorRunsPerMonth: runs,
    serviceBusBase,
    supervisorGBSeconds: gbSeconds,
    supervisorCompute,
    supervisorExecutions,
    table,
    total: serviceBusBase + supervisorCompute + supervisorExecutions + table,
    totalAfterFreeGrant: serviceBusBase + afterGrant + table,
  };
}

/** One always-ready instance for a month: its baseline, billed whether it executes or not. */
export function alwaysReadyBaselineMonthly(memoryMB: number, prices: PriceTable): number {
  const seconds = prices.hoursPerMonth * 3600;
  return seconds * gigabytes(memoryMB) * prices.flexConsumption.alwaysReady.baselinePerGBSecond.value;
}

/**
 * The margin rule for instance memory: the worker's measured peak resident memory may use at most
 * `share` of the instance. The rest is for what this bench cannot measure: the Functions host
 * process that shares the instance in Azure, and load beyond the bench's.
 */
export const memoryShare = 0.5;

export function smallestInstance(
  peakRssMB: number,
  sizesMB: readonly number[],
  share: number = memoryShare,
): { sizeMB: number; usedShare: number } | null {
  if (!(peakRssMB > 0)) throw new RangeError(`peakRssMB must be positive, got ${peakRssMB}`);
  if (!(share > 0 && share <= 1)) throw new RangeError(`share must be in (0, 1], got ${share}`);
  const fits = [...sizesMB].sort((a, b) => a - b).find((s) => peakRssMB <= s * share);
  return fits === undefined ? null : { sizeMB: fits, usedShare: peakRssMB / fits };
}
