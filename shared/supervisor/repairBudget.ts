/**
 * How much of a repair pass one Supervisor run does (StateStore.reconcilePage pages): pages of
 * state rows or index entries, and wall time, whichever ends first. The hourly pass is small once
 * backfilled (the in-flight entries). The daily full pass reads every retained order, twice (its
 * state row and its index entry), so it gets a larger share: at 10 million retained orders it must
 * end within its day with room to spare (bench/fullPass.ts prints the figure).
 */
export interface RepairBudget {
  pageSize: number;
  pagesPerRun: number;
  budgetMs: number;
}

export const hourlyRepairBudget: RepairBudget = { pageSize: 1000, pagesPerRun: 5, budgetMs: 5000 };
/**
 * Two thirds of a 30-s run: the sweep runs before it (so a retry is never delayed) and the purge
 * slice after it. Measured on Azurite here: 10 million retained orders in about 15 hours.
 */
export const fullRepairBudget: RepairBudget = { pageSize: 1000, pagesPerRun: 40, budgetMs: 20_000 };

/** The share of the pass under way (a full pass's cursor says so). */
export const repairBudgetFor = (full: boolean): RepairBudget =>
  full ? fullRepairBudget : hourlyRepairBudget;
