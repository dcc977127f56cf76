import type { Counts } from './stats.js';

/**
 * What one table request did, by operation and outcome, so a partition's load per order can be
 * broken down (point reads, queries, inserts, upserts, conditional updates, deletes, batches by
 * what they hold) and the refused (503/500 from the throttle) and failed (404/409/412) told apart
 * from what the server did. Pure; test/bench/tableOps.test.ts.
 */
export type TableOperation =
  'get' | 'query' | 'insert' | 'upsert' | 'update' | 'merge' | 'upsertMerge' | 'delete';

/** One operation from its method, whether its path names an entity and whether it carries If-Match. */
export function operationOf(method: string, keyed: boolean, ifMatch: boolean): TableOperation {
  switch (method.toUpperCase()) {
    case 'GET':
      return keyed ? 'get' : 'query';
    case 'POST':
      return 'insert';
    case 'PUT':
      return ifMatch ? 'update' : 'upsert';
    case 'MERGE':
    case 'PATCH':
      return ifMatch ? 'merge' : 'upsertMerge';
    default:
      return 'delete';
  }
}

/**
 * An entity-group transaction named by what it holds, e.g. `batch(delete4+update1)`: an index
 * group's entry (`insert1+upsert3` and the counter) and its removal read apart at a glance.
 */
export function batchSignature(body: string): string {
  const ops: Record<string, number> = {};
  // Each sub-request: its request line, then its headers up to a blank line.
  const parts = body.split(/^(?=(?:POST|PUT|PATCH|MERGE|DELETE|GET) https?:\/\/)/m).slice(1);
  for (const part of parts) {
    const m = /^(\w+) (\S+)/.exec(part);
    if (!m) continue;
    const headers = part.split(/\r?\n\r?\n/)[0];
    const op = operationOf(
      m[1],
      /\(PartitionKey=/.test(decodeURIComponent(m[2])),
      /^if-match:/im.test(headers),
    );
    ops[op] = (ops[op] ?? 0) + 1;
  }
  const names = Object.keys(ops).sort();
  return names.length ? `batch(${names.map((n) => `${n}${ops[n]}`).join('+')})` : 'batch()';
}

/**
 * How a request ended: `ok`, the status it failed with (`404`, `409`, `412`, ...), or
 * `refused503`/`refused500` when the throttle answered without forwarding. A batch answers 202
 * and names a failed sub-request's status in its body.
 */
export function outcomeOf(status: number, batchPayload?: string): string {
  if (batchPayload !== undefined && status === 202) {
    const failed = /^HTTP\/1\.1 ([3-5]\d\d)/m.exec(batchPayload);
    return failed ? failed[1] : 'ok';
  }
  return status < 300 ? 'ok' : String(status);
}

/** `op.{table}|{group}.{operation}.{outcome}.{requests|entities}`. */
export const operationKey = (
  table: string,
  group: string,
  operation: string,
  outcome: string,
  what: 'requests' | 'entities',
): string => `op.${table}|${group}.${operation}.${outcome}.${what}`;

export function countOperation(
  counts: Counts,
  op: { table: string; group: string; operation: string; outcome: string; entities: number },
): void {
  const r = operationKey(op.table, op.group, op.operation, op.outcome, 'requests');
  counts[r] = (counts[r] ?? 0) + 1;
  if (op.entities > 0) {
    const e = operationKey(op.table, op.group, op.operation, op.outcome, 'entities');
    counts[e] = (counts[e] ?? 0) + op.entities;
  }
}

export interface OperationLoad {
  table: string;
  group: string;
  operation: string;
  outcome: string;
  requestsPerOrder: number;
  /** Written by a write (attempted, when it failed or was refused), returned by a read. */
  entitiesPerOrder: number;
}

const opKey = /^(?:table\.)?op\.([^|]+)\|(.*)\.([^.]+)\.([^.]+)\.(requests|entities)$/;

/** The operations of a counter window per completed order, for the groups `keep` selects, most entities first. */
export function operationBreakdown(
  before: Counts,
  after: Counts,
  orders: number,
  keep: (table: string, group: string) => boolean,
): OperationLoad[] {
  const rows = new Map<string, OperationLoad>();
  if (!(orders > 0)) return [];
  for (const [k, v] of Object.entries(after)) {
    const m = opKey.exec(k);
    if (!m || !keep(m[1], m[2])) continue;
    const d = (v - (before[k] ?? 0)) / orders;
    if (d === 0) continue;
    const id = `${m[1]}|${m[2]}|${m[3]}|${m[4]}`;
    const row = rows.get(id) ?? {
      table: m[1],
      group: m[2],
      operation: m[3],
      outcome: m[4],
      requestsPerOrder: 0,
      entitiesPerOrder: 0,
    };
    if (m[5] === 'requests') row.requestsPerOrder += d;
    else row.entitiesPerOrder += d;
    rows.set(id, row);
  }
  return [...rows.values()].sort(
    (a, b) => b.entitiesPerOrder - a.entitiesPerOrder || b.requestsPerOrder - a.requestsPerOrder,
  );
}
