import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { groupOf, readPartition, writtenPartition } from './partitionLoad.js';
import type { Counts } from './stats.js';
import { partitionCharge, tableErrorResponse, type TableThrottle } from './tableThrottle.js';
import { batchSignature, countOperation, operationOf, outcomeOf } from './tableOps.js';

/**
 * A counting HTTP proxy in front of Azurite's table endpoint. Every HTTP request the table
 * service receives is one billed transaction (an entity-group `$batch` is one), so counting here
 * measures the real app in the real host process without touching its code.
 */
export type TableRequestKind = 'read' | 'query' | 'write' | 'batch' | 'admin';

export interface ClassifiedRequest {
  kind: TableRequestKind;
  /** The table named in the path, '' for `$batch` and `Tables`. */
  table: string;
}

/** Classifies one table-service request by method and URL path (pure; unit-tested). */
export function classifyTableRequest(method: string, url: string): ClassifiedRequest {
  const path = decodeURIComponent(url.split('?')[0]);
  const last = path.replace(/\/+$/, '').split('/').pop() ?? '';
  const m = method.toUpperCase();
  if (last === '$batch') return { kind: 'batch', table: '' };
  if (/^Tables(\(|$)/.test(last)) return { kind: 'admin', table: '' };
  const table = last.split('(')[0];
  const key = /\(PartitionKey=.*RowKey=.*\)$/.test(last);
  if (m === 'GET') return { kind: key ? 'read' : 'query', table };
  return { kind: 'write', table };
}

/**
 * The storage account a request is for: Azurite (and the local stack) is path-style, so it is the
 * first path segment (`/devstoreaccount1/Orders(...)`, `/orders2/$batch`). Pure; unit-tested.
 */
export function accountInPath(url: string): string {
  return decodeURIComponent(url.split('?')[0]).split('/').filter(Boolean)[0] ?? '';
}

/** Sub-requests of an entity-group transaction body (multipart/mixed). */
export function batchOperationCount(body: string): number {
  return (body.match(/^(POST|PUT|PATCH|MERGE|DELETE|GET) https?:\/\//gm) ?? []).length;
}

/** The entity key in a request path or a batch line: `Table(PartitionKey='p',RowKey='r')`. */
const keyInPath = /\(PartitionKey='((?:[^']|'')*)',\s*RowKey='(?:[^']|'')*'\)/;
const unquote = (s: string): string => s.replace(/''/g, "'");

/** The partition an entity path names, or undefined (pure; unit-tested). */
export function partitionInPath(pathAndQuery: string): string | undefined {
  const path = decodeURIComponent(pathAndQuery.split('?')[0]);
  const m = keyInPath.exec(path);
  return m ? unquote(m[1]) : undefined;
}

/** The partition a query's `$filter` pins with `PartitionKey eq '...'`, or undefined (a scan). */
export function partitionInFilter(pathAndQuery: string): string | undefined {
  const q = pathAndQuery.indexOf('?');
  if (q < 0) return undefined;
  const filter = new URLSearchParams(pathAndQuery.slice(q + 1)).get('$filter') ?? '';
  const m = /PartitionKey eq '((?:[^']|'')*)'/.exec(filter);
  return m ? unquote(m[1]) : undefined;
}

/** The partition of an insert (POST to the table): from the JSON body. */
export function partitionInBody(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { PartitionKey?: unknown };
    return typeof parsed.PartitionKey === 'string' ? parsed.PartitionKey : undefined;
  } catch {
    return undefined;
  }
}

/**
 * An entity-group transaction: its table and partition (one per batch, as Azure requires) and
 * the number of entities it writes. Read from the request lines and the insert bodies.
 */
export function batchTarget(
  body: string,
): { table: string; partition: string; entities: number } | undefined {
  const lines = body.split(/\r?\n/);
  let table = '';
  let partition: string | undefined;
  let entities = 0;
  for (const line of lines) {
    const req = /^(POST|PUT|PATCH|MERGE|DELETE|GET) (https?:\/\/\S+)/.exec(line);
    if (req) {
      entities++;
      const url = new URL(req[2]);
      const last = decodeURIComponent(url.pathname).replace(/\/+$/, '').split('/').pop() ?? '';
      table ||= last.split('(')[0];
      partition ??= partitionInPath(url.pathname);
      continue;
    }
    if (partition === undefined && line.startsWith('{')) partition = partitionInBody(line);
  }
  if (entities === 0 || partition === undefined) return undefined;
  return { table, partition, entities };
}

/** Entities a query returned, per partition when the payload names it (Azure returns the keys). */
export function queryEntitiesByPartition(payload: string): { total: number; byPartition: Counts } {
  try {
    const parsed = JSON.parse(payload) as { value?: Array<{ PartitionKey?: unknown }> };
    const rows = Array.isArray(parsed.value) ? parsed.value : [];
    const byPartition: Counts = {};
    for (const r of rows) {
      const pk = typeof r.PartitionKey === 'string' ? r.PartitionKey : '(unnamed)';
      byPartition[pk] = (byPartition[pk] ?? 0) + 1;
    }
    return { total: rows.length, byPartition };
  } catch {
    return { total: 0, byPartition: {} };
  }
}

/**
 * Per-partition counters, keyed `part.{table}/{partition}.{what}` with `what` one of requests,
 * read (entities read), written (entities written). A query that names no partition is counted
 * against `{table}/(scan)` for the request and against each partition it returned for entities.
 */
export const partitionKey = (table: string, partition: string, what: 'requests' | 'read' | 'written') =>
  `part.${table}/${partition}.${what}`;

export interface TableCounters {
  /** `${kind}` totals, `${table}.${kind}` per table, `status.${code}`, `entitiesRead`, `batchOperations`. */
  counts: Counts;
}

export interface TableProxy {
  port: number;
  /** Where requests go; requests that arrive before it is set wait. */
  setUpstream(baseUrl: string): void;
  snapshot(): Counts;
  close(): Promise<void>;
}

function bump(counts: Counts, key: string, by = 1): void {
  counts[key] = (counts[key] ?? 0) + by;
}

async function readAll(stream: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** One request against the partition it touches; writes count their entities here. */
function countPartitionRequest(
  counts: Counts,
  method: string,
  url: string,
  kind: TableRequestKind,
  table: string,
  body: Buffer,
): void {
  if (kind === 'batch') {
    const target = batchTarget(body.toString('utf8'));
    if (!target) return bump(counts, 'part.unparsed');
    bump(counts, partitionKey(target.table, target.partition, 'requests'));
    bump(counts, partitionKey(target.table, target.partition, 'written'), target.entities);
    return;
  }
  const partition =
    kind === 'query'
      ? (partitionInFilter(url) ?? '(scan)')
      : (partitionInPath(url) ??
        (method.toUpperCase() === 'POST' ? partitionInBody(body.toString('utf8')) : undefined));
  if (partition === undefined) return bump(counts, 'part.unparsed');
  bump(counts, partitionKey(table, partition, 'requests'));
  if (kind === 'write') bump(counts, partitionKey(table, partition, 'written'));
}

/** Entities a successful read or query returned, against their partitions. */
function countPartitionRead(
  counts: Counts,
  url: string,
  kind: TableRequestKind,
  table: string,
  payload: Buffer,
): void {
  if (kind === 'read') {
    const partition = partitionInPath(url);
    if (partition !== undefined) bump(counts, partitionKey(table, partition, 'read'));
    return;
  }
  const pinned = partitionInFilter(url);
  const { total, byPartition } = queryEntitiesByPartition(payload.toString('utf8'));
  if (pinned !== undefined) {
    if (total > 0) bump(counts, partitionKey(table, pinned, 'read'), total);
    return;
  }
  for (const [p, n] of Object.entries(byPartition)) bump(counts, partitionKey(table, p, 'read'), n);
}

/** A request's partition group and operation, for the per-operation counters (tableOps.ts). */
/** The group of a partition without its table's name (groupOf prefixes it). */
const groupIn = (table: string, partition: string): string =>
  groupOf(table, partition).slice(table.length + 1);

function describeOperation(
  req: IncomingMessage,
  kind: TableRequestKind,
  table: string,
  body: Buffer,
): { table: string; group: string; operation: string; writes: number } {
  const url = req.url ?? '/';
  const method = req.method ?? 'GET';
  if (kind === 'batch') {
    const text = body.toString('utf8');
    const t = batchTarget(text);
    return {
      table: t?.table ?? '?',
      group: t ? groupIn(t.table, t.partition) : '?',
      operation: batchSignature(text),
      writes: t?.entities ?? 0,
    };
  }
  const keyed = partitionInPath(url);
  const partition =
    kind === 'query'
      ? (partitionInFilter(url) ?? '(scan)')
      : (keyed ?? (method.toUpperCase() === 'POST' ? partitionInBody(body.toString('utf8')) : undefined));
  return {
    table,
    group: partition === undefined ? '?' : groupIn(table, partition),
    operation: operationOf(method, keyed !== undefined, req.headers['if-match'] !== undefined),
    writes: kind === 'write' ? 1 : 0,
  };
}

function rowsIn(payload: Buffer): number {
  try {
    const parsed = JSON.parse(payload.toString('utf8')) as { value?: unknown[] };
    return Array.isArray(parsed.value) ? parsed.value.length : 0;
  } catch {
    return 0;
  }
}

/** `throttle`: enforce (scaled) Azure limits and answer as the Table service past them. */
export async function startTableProxy(options: { throttle?: TableThrottle } = {}): Promise<TableProxy> {
  const { throttle } = options;
  const counts: Counts = {};
  let upstream: URL | undefined;
  let ready!: () => void;
  const upstreamSet = new Promise<void>((resolve) => (ready = resolve));

  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readAll(req);
      await upstreamSet;
      const { kind, table } = classifyTableRequest(req.method ?? 'GET', req.url ?? '/');
      const account = accountInPath(req.url ?? '/');
      const charge = throttle
        ? partitionCharge(req.method ?? 'GET', req.url ?? '/', kind, table, body)
        : undefined;
      const refusal = throttle && kind !== 'admin' ? throttle.admit(charge, account) : undefined;
      const op = kind === 'admin' ? undefined : describeOperation(req, kind, table, body);
      // Per account and table (a batch by its target's table): what spends each account's requests.
      const tableOf = kind === 'batch' ? (batchTarget(body.toString('utf8'))?.table ?? '?') : table;
      if (refusal) {
        bump(counts, `throttled.${refusal.scope}`);
        bump(counts, `account.${account}.throttled`);
        bump(counts, `account.${account}.table.${tableOf}.throttled`);
        bump(counts, `status.${refusal.status}`);
        if (op) countOperation(counts, { ...op, outcome: `refused${refusal.status}`, entities: op.writes });
        const answer = tableErrorResponse(refusal);
        res.writeHead(answer.status, answer.headers);
        res.end(answer.body);
        return;
      }
      if (kind !== 'admin') {
        bump(counts, 'transactions');
        bump(counts, `account.${account}.transactions`);
        bump(counts, `account.${account}.table.${tableOf}.${kind}`);
        bump(counts, kind);
        if (table) bump(counts, `${table}.${kind}`);
        if (kind === 'batch') bump(counts, 'batchOperations', batchOperationCount(body.toString('latin1')));
        countPartitionRequest(counts, req.method ?? 'GET', req.url ?? '/', kind, table, body);
      } else bump(counts, 'admin');
      const written =
        kind === 'write' || kind === 'batch'
          ? writtenPartition(req.method ?? 'GET', req.url ?? '/', body.toString('latin1'))
          : undefined;
      const read = kind === 'read' || kind === 'query' ? readPartition(req.url ?? '/') : undefined;
      const target = upstream!;
      const out = httpRequest(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: target.host },
        },
        (up) => {
          void (async () => {
            const payload = await readAll(up);
            bump(counts, `status.${up.statusCode ?? 0}`);
            if (op) {
              const status = up.statusCode ?? 0;
              const returned = kind === 'query' && status === 200 ? rowsIn(payload) : 0;
              countOperation(counts, {
                ...op,
                outcome: outcomeOf(status, kind === 'batch' ? payload.toString('latin1') : undefined),
                // What the partition's bucket paid: a read or query at least one, then its rows.
                entities: kind === 'query' ? Math.max(1, returned) : kind === 'read' ? 1 : op.writes,
              });
            }
            // Entities per partition (Azure's per-partition target), only for what the server accepted.
            const ok = (up.statusCode ?? 0) < 300;
            if (
              written &&
              ok &&
              !(kind === 'batch' && /HTTP\/1\.1 [45]\d\d/.test(payload.toString('latin1')))
            )
              bump(counts, `partition.${written.table}|${written.partitionKey}.written`, written.entities);
            if (up.statusCode === 200 && (kind === 'read' || kind === 'query')) {
              let n = kind === 'read' ? 1 : 0;
              if (kind === 'query') {
                try {
                  const parsed = JSON.parse(payload.toString('utf8')) as { value?: unknown[] };
                  n = Array.isArray(parsed.value) ? parsed.value.length : 0;
                } catch {
                  n = 0;
                }
              }
              bump(counts, 'entitiesRead', n);
              if (kind === 'query') throttle?.paidRead(charge, n, account);
              if (table) bump(counts, `${table}.entitiesRead`, n);
              if (read) bump(counts, `partition.${read.table}|${read.partitionKey}.read`, n);
              countPartitionRead(counts, req.url ?? '/', kind, table, payload);
            }
            res.writeHead(up.statusCode ?? 502, up.headers);
            res.end(payload);
          })().catch(() => res.destroy());
        },
      );
      out.on('error', () => {
        bump(counts, 'proxyErrors');
        res.destroy();
      });
      out.end(body);
    })().catch(() => res.destroy());
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    setUpstream(baseUrl: string) {
      upstream = new URL(baseUrl);
      ready();
    },
    snapshot: () => ({ ...counts }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
