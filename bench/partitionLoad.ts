/**
 * Which table partition a request loads, and by how many entities: Azure's scalability target is
 * per partition (2,000 entities/s), so the bench counts entities written and read per partition at
 * the server (the table proxy), not from the app's own idea of what it does. Pure; unit-tested.
 */
export interface PartitionLoad {
  table: string;
  partitionKey: string;
  entities: number;
}

/** `'a''b'` (OData string literal, URL-decoded) to `a'b`. */
const unquote = (s: string): string => s.replace(/''/g, "'");

function keyInUrl(url: string): { table: string; partitionKey: string } | undefined {
  const path = decodeURIComponent(url.split('?')[0]);
  const m = /\/([A-Za-z][A-Za-z0-9]*)\(PartitionKey='((?:[^']|'')*)',\s*RowKey=/.exec(path);
  return m ? { table: m[1], partitionKey: unquote(m[2]) } : undefined;
}

function tableInUrl(url: string): string {
  const path = decodeURIComponent(url.split('?')[0]).replace(/\/+$/, '');
  return (path.split('/').pop() ?? '').split('(')[0];
}

/** Entities one write request (single or `$batch`) writes, and where. */
export function writtenPartition(method: string, url: string, body: string): PartitionLoad | undefined {
  const path = url.split('?')[0];
  if (path.endsWith('$batch')) {
    // Every operation of an entity-group transaction is in one partition.
    const ops = [...body.matchAll(/^(POST|PUT|PATCH|MERGE|DELETE) (https?:\/\/\S+) HTTP/gm)];
    if (ops.length === 0) return undefined;
    const first = ops[0][2];
    const inUrl = keyInUrl(new URL(first).pathname);
    const inBody = /"PartitionKey"\s*:\s*"((?:[^"\\]|\\.)*)"/.exec(body);
    const partitionKey = inUrl?.partitionKey ?? (inBody ? (JSON.parse(`"${inBody[1]}"`) as string) : '?');
    return { table: inUrl?.table ?? tableInUrl(new URL(first).pathname), partitionKey, entities: ops.length };
  }
  if (method.toUpperCase() === 'GET') return undefined;
  const inUrl = keyInUrl(url);
  if (inUrl) return { ...inUrl, entities: 1 };
  try {
    const entity = JSON.parse(body) as { PartitionKey?: unknown };
    if (typeof entity.PartitionKey === 'string')
      return { table: tableInUrl(url), partitionKey: entity.PartitionKey, entities: 1 };
  } catch {
    // not an entity body (table admin)
  }
  return undefined;
}

/**
 * The partition a read names: a point read's key, or a query's `PartitionKey eq '...'`; undefined
 * for a query across partitions (the sweep's).
 */
export function readPartition(url: string): { table: string; partitionKey: string } | undefined {
  const point = keyInUrl(url);
  if (point) return point;
  const query = new URLSearchParams(url.split('?')[1] ?? '').get('$filter') ?? '';
  const m = /PartitionKey eq '((?:[^']|'')*)'/.exec(query);
  return m ? { table: tableInUrl(url), partitionKey: unquote(m[1]) } : undefined;
}

export interface PartitionGroupLoad {
  /** `table|partition`, an order's own partition shown as `{order}`, a spread one as `...:{p}`. */
  group: string;
  /** Distinct partitions of the group the orders touched. */
  partitions: number;
  writtenPerOrder: number;
  readPerOrder: number;
  /** The most any one partition of the group was written, per order. */
  maxWrittenPerPartitionPerOrder: number;
}

/** The group a partition belongs to: an order's own, a spread family (`...:{p}`), or itself. */
export function groupOf(table: string, partitionKey: string): string {
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-/.test(partitionKey)) return `${table}|{order}`;
  if (/^state:[A-Za-z]+:\d+$/.test(partitionKey)) return `${table}|${partitionKey.replace(/:\d+$/, ':{p}')}`;
  if (table.startsWith('InFlight') && /^[0-9a-f]{2}$/.test(partitionKey)) return `${table}|{2 hex}`;
  return `${table}|${partitionKey}`;
}

/** Per-partition counters (`table.partition.{table}|{pk}.written|read`) summed over `orders` orders. */
export function partitionSummary(counts: Record<string, number>, orders: number): PartitionGroupLoad[] {
  const groups = new Map<string, { parts: Map<string, number>; written: number; read: number }>();
  for (const [key, value] of Object.entries(counts)) {
    const m = /^(?:table\.)?partition\.([^|]+)\|(.*)\.(written|read)$/.exec(key);
    if (!m) continue;
    const [, table, partitionKey, what] = m;
    const name = groupOf(table, partitionKey);
    const g = groups.get(name) ?? { parts: new Map<string, number>(), written: 0, read: 0 };
    if (what === 'written') {
      g.written += value;
      g.parts.set(partitionKey, (g.parts.get(partitionKey) ?? 0) + value);
    } else {
      g.read += value;
      if (!g.parts.has(partitionKey)) g.parts.set(partitionKey, 0);
    }
    groups.set(name, g);
  }
  return [...groups.entries()]
    .map(([group, g]) => ({
      group,
      partitions: g.parts.size,
      writtenPerOrder: g.written / orders,
      readPerOrder: g.read / orders,
      maxWrittenPerPartitionPerOrder: Math.max(0, ...g.parts.values()) / orders,
    }))
    .sort((a, b) => b.maxWrittenPerPartitionPerOrder - a.maxWrittenPerPartitionPerOrder);
}
