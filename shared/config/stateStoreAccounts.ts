import { z } from 'zod';
import { storageConnectionProblem } from './connectionStrings.js';

/**
 * StateStoreAccounts: the storage accounts orders are spread over (docs/state-store.md, "Accounts"),
 * in order, separated by commas. Each entry is a table endpoint URL (managed identity, Azure) or a
 * storage connection string (locally). Connection strings never hold a comma (base64 keys, URL-
 * encoded SAS), so the comma is safe. The first entry must be the StateStoreConnection account:
 * the orders stored before the spread live there, and an order's account is counted from it.
 */
export const maxStateStoreAccounts = 64;

export type AccountEntry =
  { kind: 'connectionString'; connectionString: string } | { kind: 'identity'; tableServiceUri: string };

const httpUrl = z.url({ protocol: /^https?$/ });

/** The entries, or what is wrong with the value. */
export function parseStateStoreAccounts(value: string): AccountEntry[] | string {
  const raw = value.split(',').map((e) => e.trim());
  if (raw.some((e) => e === '')) return 'has an empty entry (entries are separated by single commas)';
  if (raw.length > maxStateStoreAccounts)
    return `lists ${raw.length} accounts; at most ${maxStateStoreAccounts}`;
  const entries: AccountEntry[] = [];
  for (const [i, entry] of raw.entries()) {
    if (/^https?:\/\//i.test(entry)) {
      if (!httpUrl.safeParse(entry).success)
        return `entry ${i + 1} is not an http(s) URL: ${entry.slice(0, 100)}`;
      entries.push({ kind: 'identity', tableServiceUri: entry.replace(/\/+$/, '') });
      continue;
    }
    const problem = storageConnectionProblem(entry);
    if (problem)
      return `entry ${i + 1} is neither a table endpoint URL nor a usable connection string: it ${problem}`;
    entries.push({ kind: 'connectionString', connectionString: entry });
  }
  const seen = new Set<string>();
  for (const [i, entry] of entries.entries()) {
    const key = accountKey(entry);
    if (seen.has(key)) return `entry ${i + 1} names an account listed before it`;
    seen.add(key);
  }
  return entries;
}

/** What names an account, to compare entries: the endpoint URL, or the connection string itself. */
export function accountKey(entry: AccountEntry): string {
  return entry.kind === 'identity'
    ? entry.tableServiceUri.replace(/\/+$/, '').toLowerCase()
    : entry.connectionString.replace(/;+\s*$/, '');
}
