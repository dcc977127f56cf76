import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { settings } from '../config/settings.js';
import type { CallBudgetSettings } from '../config/callLimits.js';
import { CallBudgets, ServiceCallGate } from '../agents/callBudget.js';
import { CallBudgetTable } from '../stateStore/callBudgetTable.js';
import type { Clock } from '../domain/index.js';

/**
 * This process's call budgets, one gate per remote service, on the state store's account. The
 * lease table opens in the background; a failed open is retried on the next call.
 */
let budgets: CallBudgets | undefined;

/** This process's name in the lease rows: unique per process, readable in the operator's readout. */
export const budgetInstance = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

export function callBudgets(clock: Clock, config: CallBudgetSettings): CallBudgets {
  if (!budgets) {
    let table: Promise<CallBudgetTable> = CallBudgetTable.open(settings().stateStore);
    const reopen = (): Promise<CallBudgetTable> => {
      table = CallBudgetTable.open(settings().stateStore);
      table.catch(() => undefined);
      return table;
    };
    table.catch(() => undefined);
    const lazyTable = (): Promise<CallBudgetTable> => table.catch(() => reopen());
    budgets = new CallBudgets(
      (service) =>
        new ServiceCallGate({
          service,
          limits: config.limits[service] ?? {},
          instance: budgetInstance,
          leaseMs: config.leaseSeconds * 1000,
          customerShare: config.customerShare,
          pauseNewsMs: config.pauseNewsSeconds * 1000,
          pull: true,
          clock,
          get table() {
            return lazyTable();
          },
        }),
    );
  }
  return budgets;
}

/** The gates this process has opened so far (the operator readout and metrics). */
export function openedBudgets(): CallBudgets | undefined {
  return budgets;
}
