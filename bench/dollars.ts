import type { StatusEventLevel } from '../shared/domain/statusEvents.js';
import { billedAloneMs, durationsByFunction, executionsPer, type Invocation } from './invocations.js';
import {
  monthAtRest,
  operations,
  perMillionOrders,
  type AtRest,
  type Durations,
  type PerMillionOrders,
  type PriceTable,
} from './pricing.js';
import type { OrderCost } from './stats.js';

/**
 * The cost section of the bench: what it counted and timed, priced. Pure, fed by run.ts.
 */
export interface MeasuredKind {
  scenario: string;
  statusEvents: StatusEventLevel;
  runs: number;
  cost: OrderCost;
  /** The app's invocations in the kind's windows (the Supervisor's timer apart: it runs at rest too). */
  invocations: Invocation[];
}

export interface PricedKind {
  scenario: string;
  statusEvents: StatusEventLevel;
  runs: number;
  serviceBusOperations: number;
  tableTransactions: number;
  executions: Record<string, number>;
  durations: Durations;
  /** Sum of the invocations' own durations per order. */
  executionMsPerOrder: number;
  /** Each measured invocation billed alone (1 s minimum, 100 ms steps), per order. */
  billedAloneMsPerOrder: number;
  /** Execution time per order × the overlap factor measured under load. */
  billedBusyMsPerOrder: number;
  perMillion: Record<number, PerMillionOrders>;
}

export interface DollarInputs {
  kinds: MeasuredKind[];
  /** Billed instance ms per ms of execution in the most loaded throughput run. */
  overlapFactor: number;
  idle: { sweepsPerHour: number; sweepMs: number; tablePerSweep: number };
  prices: PriceTable;
  sizesMB: number[];
}

export interface DollarReport {
  kinds: PricedKind[];
  atRest: Record<number, AtRest>;
  overlapFactor: number;
}

export function priceKinds(inputs: DollarInputs): DollarReport {
  const kinds = inputs.kinds.map((k): PricedKind => {
    const durations = durationsByFunction(k.invocations);
    const executionMsPerOrder = k.invocations.reduce((s, i) => s + i.durationMs, 0) / k.runs;
    const billedBusyMsPerOrder = executionMsPerOrder * inputs.overlapFactor;
    const profile = {
      name: k.scenario,
      tableTransactions: k.cost.table.total,
      serviceBus: k.cost.serviceBus,
      executions: executionsPer(k.invocations, k.runs),
    };
    return {
      scenario: k.scenario,
      statusEvents: k.statusEvents,
      runs: k.runs,
      serviceBusOperations: operations(k.cost.serviceBus),
      tableTransactions: k.cost.table.total,
      executions: profile.executions,
      durations,
      executionMsPerOrder,
      billedAloneMsPerOrder: billedAloneMs(k.invocations, inputs.prices) / k.runs,
      billedBusyMsPerOrder,
      perMillion: Object.fromEntries(
        inputs.sizesMB.map((mb) => [
          mb,
          perMillionOrders(profile, durations, mb, inputs.prices, billedBusyMsPerOrder),
        ]),
      ),
    };
  });
  const atRest = Object.fromEntries(
    inputs.sizesMB.map((mb) => [
      mb,
      monthAtRest(
        inputs.idle.sweepsPerHour,
        inputs.idle.sweepMs,
        inputs.idle.tablePerSweep,
        mb,
        inputs.prices,
      ),
    ]),
  );
  return { kinds, atRest, overlapFactor: inputs.overlapFactor };
}

/** Compute dollars per million orders saved by a smaller instance, at both ends of Flex billing. */
export function savingPerMillion(
  kind: PricedKind,
  fromMB: number,
  toMB: number,
): { sparseP50: number; busy: number | null } {
  const from = kind.perMillion[fromMB];
  const to = kind.perMillion[toMB];
  if (!from || !to) throw new Error(`no prices for ${fromMB} MB and ${toMB} MB`);
  return {
    sparseP50: from.computeSparseP50 - to.computeSparseP50,
    busy: from.computeBusy === null || to.computeBusy === null ? null : from.computeBusy - to.computeBusy,
  };
}
