import type { ProcessState } from './state.js';

/**
 * What an operator's bulk action selects: orders in one state, optionally of one customer or
 * workflow version, that entered the state within a time range (both ends inclusive).
 */
export interface OrderFilter {
  state: ProcessState;
  customerId?: string;
  workflowVersion?: number;
  from?: Date;
  to?: Date;
}

/** The facts of one order that a filter looks at, as its rows say now. */
export interface FilteredOrder {
  processState: ProcessState;
  customerId: string;
  workflowVersion: number;
  /** When the order entered its process state. */
  stateSince: Date;
}

/**
 * Why an order does not match a filter, or undefined when it does. A bulk action asks this again
 * for each order when it reaches it, on the state it is about to write over: the list it started
 * from is older than the order.
 */
export function filterMismatch(filter: OrderFilter, order: FilteredOrder): string | undefined {
  if (order.processState !== filter.state) return `it is ${order.processState}, not ${filter.state}`;
  if (filter.customerId !== undefined && order.customerId !== filter.customerId)
    return `its customer is not ${filter.customerId}`;
  if (filter.workflowVersion !== undefined && order.workflowVersion !== filter.workflowVersion)
    return `it runs workflow version ${order.workflowVersion}, not ${filter.workflowVersion}`;
  const since = order.stateSince.getTime();
  if (filter.from !== undefined && since < filter.from.getTime())
    return `it entered ${order.processState} at ${order.stateSince.toISOString()}, before ${filter.from.toISOString()}`;
  if (filter.to !== undefined && since > filter.to.getTime())
    return `it entered ${order.processState} at ${order.stateSince.toISOString()}, after ${filter.to.toISOString()}`;
  return undefined;
}
