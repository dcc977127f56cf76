import { createHash } from 'node:crypto';
import type { TableClient } from '@azure/data-tables';
import { SettingsError, settingNames } from '../config/settings.js';
import { httpStatusOf } from './errors.js';
import type { StoreMetrics } from './metrics.js';

/**
 * Which storage account holds an order: account `accountNumber(orderId, N)` of the N listed in
 * StateStoreAccounts, so no lookup. SHA-256, not the state index's FNV-1a: FNV-1a's low bits
 * follow the id's characters alone, so with both counts even every account would use only half
 * of its index partitions.
 *
 * Orders never move between accounts (an entity-group transaction cannot span two accounts, so a
 * move could not be atomic with the writers' ETag guards). Changing N instead keeps the earlier
 * counts in one row of account 0's index table (`layout`/`accounts`): a point read by id tries
 * the account of the current count first, then those of the earlier ones. Cross-order reads
 * cover every listed account anyway; the list may only grow (docs/state-store.md, "Accounts").
 */
export function accountNumber(orderId: string, accounts: number): number {
  if (accounts <= 1) return 0;
  return createHash('sha256').update(orderId).digest().readUInt32BE(0) % accounts;
}

const layoutRow = { partitionKey: 'layout', rowKey: 'accounts' };

function parseCounts(value: unknown): number[] {
  if (typeof value !== 'string') return [];
  return value
    .split(',')
    .map(Number)
    .filter((n) => Number.isInteger(n) && n >= 1);
}

export class AccountLayout {
  /** Every account count whose orders may still be in place, the current first. */
  private counts: number[];

  constructor(
    /** Account 0's state index table. */
    private readonly table: TableClient,
    private readonly metrics: StoreMetrics,
    readonly current: number,
  ) {
    this.counts = [current];
  }

  all(): number[] {
    return this.counts;
  }

  /** Where a new order goes. */
  home(orderId: string): number {
    return accountNumber(orderId, this.current);
  }

  /** The accounts that may hold the order: its current one first, then the earlier layouts'. */
  candidates(orderId: string): number[] {
    return [...new Set(this.counts.map((n) => accountNumber(orderId, n)))];
  }

  /**
   * Reads the row and adds the current count. Without a row, orders stored before the spread
   * (account 0 holds any) make the single-account layout an earlier one. Fewer accounts than a
   * listed count would orphan the orders of the dropped ones: refused, naming the setting.
   * One account and no row writes nothing (the single-account store is unchanged).
   */
  async open(account0HasOrders: () => Promise<boolean>): Promise<void> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const row = await this.readRow();
      if (row === null) {
        if (this.current === 1) return;
        const listed = (await account0HasOrders()) ? [this.current, 1] : [this.current];
        try {
          await this.table.createEntity({ ...layoutRow, Accounts: listed.join(',') });
          this.counts = listed;
          return;
        } catch (e) {
          if (httpStatusOf(e) !== 409) throw e;
          continue;
        }
      }
      const listed = parseCounts(row.Accounts);
      const most = Math.max(0, ...listed);
      if (most > this.current) {
        throw new SettingsError(
          settingNames.stateStoreAccounts,
          `lists ${this.current} account(s), but orders have been stored across ${most} ` +
            `(layouts ${listed.join(', ')}): accounts may be added at the end, never removed`,
        );
      }
      if (listed.includes(this.current)) {
        this.counts = [this.current, ...listed.filter((n) => n !== this.current)];
        return;
      }
      try {
        await this.table.updateEntity(
          { ...layoutRow, Accounts: [this.current, ...listed].join(',') },
          'Replace',
          {
            etag: row.etag,
          },
        );
        this.counts = [this.current, ...listed];
        return;
      } catch (e) {
        if (httpStatusOf(e) !== 412) throw e;
      }
    }
    throw new Error('account layout row: too many concurrent writers');
  }

  private async readRow(): Promise<{ Accounts?: unknown; etag: string } | null> {
    try {
      const row = await this.table.getEntity<{ Accounts?: unknown }>(
        layoutRow.partitionKey,
        layoutRow.rowKey,
      );
      this.metrics.entitiesRead += 1;
      return row;
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      throw e;
    }
  }
}
