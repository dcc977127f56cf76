import { createDefaultHttpClient } from '@azure/core-rest-pipeline';
import type { TableClient } from '@azure/data-tables';
import type { TokenCredential } from '@azure/identity';
import type { StateStoreConnection } from '../config/settings.js';
import { emptyBudgetRow, type BudgetGrant, type BudgetRow } from '../domain/callBudget.js';
import { ensureTable, tableClient } from './clients.js';
import { httpStatusOf } from './errors.js';

/**
 * One lease row per remote service (PartitionKey = the service, RowKey 'budget'): the instances'
 * grants of its global call budget, its pause and its AIMD rate. Every write is ETag-guarded (or
 * an insert that fails if the row exists), so two instances never both take the same headroom.
 * One partition per service: each is written once per lease period per active instance.
 */
export const callBudgetRowKey = 'budget';

/** What each instance reports with its grant, for the operator's readout. */
export interface GrantReport {
  /** Requests it sent back to wait, not yet started. */
  waiting: number;
  /** Epoch ms: when the oldest of them first waited (0: none). */
  oldestWaitingSince: number;
  /** The order of that request. */
  oldestWaitingOrder?: string;
  /** Calls it started per second over its last lease period. */
  startedPerSecond: number;
  /**
   * Pull mode: requests it sent to the waiting queue minus those it pulled from it, since it
   * started. Summed over the live grants: how many wait (a request's expected wait).
   */
  waitingNet?: number;
  /** Pull mode, epoch ms: the latest due time of a request it sent to wait or pulled. */
  waitDueAt?: number;
  /** Pull mode, epoch ms: when a pull of it last found the waiting queue empty. */
  waitEmptyAt?: number;
  /** Pull mode: the longest wait of the requests it pulled in the last few seconds (ms). */
  pulledWaitMs?: number;
}

export type ReportedGrant = BudgetGrant & Partial<GrantReport>;

export interface StoredBudget {
  row: BudgetRow & { grants: ReportedGrant[] };
  etag: string | null;
}

export class BudgetWriteConflict extends Error {
  constructor(service: string) {
    super(`call budget of ${service} changed concurrently`);
    this.name = 'BudgetWriteConflict';
  }
}

const num = (v: unknown, fallback = 0): number =>
  typeof v === 'number' && Number.isFinite(v) ? v : fallback;

/**
 * A lease-row read not answered within this gets a second request, and the first answer wins
 * (the other is abandoned). A renewal waits for the read, and one landing after its lease and
 * grace lapses the grant. In the staged bench reads from the hosts were held 2-23 s: each was on
 * a new connection queued for a loaded Azurite's accept (docs/performance.md, session 11), and the
 * second read, on another new connection, queued with it; the lease's own connections (open())
 * mended that. The second read stays for a read held up alone. A point read normally answers in
 * milliseconds, so the second costs one read transaction only when the first is that late.
 * Reads only: a write is ETag-guarded, and a second one would lose to the first.
 */
export const leaseReadHedgeMs = 700;

export class CallBudgetTable {
  constructor(readonly client: TableClient) {}

  static async open(
    connection: StateStoreConnection,
    tableName = 'CallBudgets',
    credential?: TokenCredential,
  ): Promise<CallBudgetTable> {
    // Connections of its own: a renewal is due within its lease, and beside a burst of the
    // process's other table requests its read opened a new connection, which a loaded Azurite
    // (Node 24: one accept per turn of its event loop) accepted 6-20 s later (staged bench).
    const client = tableClient(connection, tableName, undefined, credential, createDefaultHttpClient());
    await ensureTable(client);
    return new CallBudgetTable(client);
  }

  async read(service: string): Promise<StoredBudget> {
    try {
      const e = await firstAnswer((abortSignal) =>
        this.client.getEntity<Record<string, unknown>>(service, callBudgetRowKey, { abortSignal }),
      );
      let grants: ReportedGrant[] = [];
      try {
        const parsed = JSON.parse(typeof e.Grants === 'string' ? e.Grants : '[]') as unknown;
        if (Array.isArray(parsed)) grants = parsed as ReportedGrant[];
      } catch {
        // A damaged row is rebuilt by the next renewals; the grants it held expire.
      }
      return {
        etag: e.etag,
        row: {
          grants,
          pausedUntil: num(e.PausedUntil),
          rateFactor: num(e.RateFactor, 1),
          refusedAt: num(e.RefusedAt),
          raisedAt: num(e.RaisedAt),
          pauses: num(e.Pauses),
        },
      };
    } catch (e) {
      if (httpStatusOf(e) === 404) return { row: { ...emptyBudgetRow, grants: [] }, etag: null };
      throw e;
    }
  }

  /** Writes `row` if it is still as read (`etag`), or creates it when `etag` is null. */
  async write(service: string, row: StoredBudget['row'], etag: string | null): Promise<void> {
    const entity = {
      partitionKey: service,
      rowKey: callBudgetRowKey,
      Grants: JSON.stringify(row.grants),
      PausedUntil: row.pausedUntil,
      RateFactor: row.rateFactor,
      RefusedAt: row.refusedAt,
      RaisedAt: row.raisedAt,
      Pauses: row.pauses,
    };
    try {
      if (etag === null) await this.client.createEntity(entity);
      else await this.client.updateEntity(entity, 'Replace', { etag });
    } catch (e) {
      const status = httpStatusOf(e);
      if (status === 412 || status === 409) throw new BudgetWriteConflict(service);
      throw e;
    }
  }

  /** Read, decide, write with the ETag; on a conflict read again. */
  async update(
    service: string,
    decide: (row: StoredBudget['row']) => StoredBudget['row'],
    maxConflicts = 20,
  ): Promise<StoredBudget['row']> {
    for (let i = 0; i < maxConflicts; i++) {
      const stored = await this.read(service);
      const next = decide(stored.row);
      try {
        await this.write(service, next, stored.etag);
        return next;
      } catch (e) {
        if (!(e instanceof BudgetWriteConflict)) throw e;
      }
    }
    throw new Error(`call budget of ${service}: ${maxConflicts} concurrent-write conflicts in a row`);
  }
}

/**
 * `request` once, and once more if the first has not answered within `leaseReadHedgeMs`: the
 * first answer wins and the other is aborted. A refusal (any HTTP status, 404 included) is an
 * answer; a request that failed without one (the client's own retries spent) waits for the
 * other, if there is one.
 */
async function firstAnswer<T>(request: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
  const controllers: AbortController[] = [];
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<T>((resolve, reject) => {
      let pending = 0;
      const send = () => {
        const c = new AbortController();
        controllers.push(c);
        pending += 1;
        request(c.signal).then(resolve, (e: unknown) => {
          pending -= 1;
          if (httpStatusOf(e) !== undefined || pending === 0) reject(e);
        });
      };
      send();
      timer = setTimeout(send, leaseReadHedgeMs);
    });
  } finally {
    clearTimeout(timer);
    for (const c of controllers) c.abort();
  }
}
