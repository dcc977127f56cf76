import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readPartition, writtenPartition } from './partitionLoad.js';
import type { Counts } from './stats.js';

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

/** Sub-requests of an entity-group transaction body (multipart/mixed). */
export function batchOperationCount(body: string): number {
  return (body.match(/^(POST|PUT|PATCH|MERGE|DELETE|GET) https?:\/\//gm) ?? []).length;
}

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

export async function startTableProxy(): Promise<TableProxy> {
  const counts: Counts = {};
  let upstream: URL | undefined;
  let ready!: () => void;
  const upstreamSet = new Promise<void>((resolve) => (ready = resolve));

  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readAll(req);
      await upstreamSet;
      const { kind, table } = classifyTableRequest(req.method ?? 'GET', req.url ?? '/');
      if (kind !== 'admin') {
        bump(counts, 'transactions');
        bump(counts, kind);
        if (table) bump(counts, `${table}.${kind}`);
        if (kind === 'batch') bump(counts, 'batchOperations', batchOperationCount(body.toString('latin1')));
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
              if (table) bump(counts, `${table}.entitiesRead`, n);
              if (read) bump(counts, `partition.${read.table}|${read.partitionKey}.read`, n);
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
