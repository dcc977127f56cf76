import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Counts } from './stats.js';

/**
 * A counting HTTP proxy in front of Azurite's blob endpoint, as tableProxy.ts is for tables: each
 * request the blob service receives is one billed operation. Blob Storage bills writes (Put Block,
 * Put Block List, Put Blob, Set Tier) and reads (Get Blob, Get Block List, Get Properties) apart,
 * and lists (List Blobs, Create Container) as their own class.
 */
export type BlobOperationClass = 'write' | 'read' | 'list';

/** The billing class of one blob request (pure). */
export function classifyBlobRequest(method: string, url: string): BlobOperationClass {
  const query = new URLSearchParams(url.split('?')[1] ?? '');
  const comp = query.get('comp');
  const restype = query.get('restype');
  const m = method.toUpperCase();
  if (comp === 'list' || restype === 'container') return 'list';
  if (m === 'PUT' || m === 'POST' || m === 'DELETE') return 'write';
  return 'read';
}

export interface BlobProxy {
  port: number;
  snapshot(): Counts;
  close(): Promise<void>;
}

async function readAll(stream: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function startBlobProxy(upstreamPort: number): Promise<BlobProxy> {
  const counts: Counts = {};
  const bump = (key: string) => (counts[key] = (counts[key] ?? 0) + 1);
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readAll(req);
      const kind = classifyBlobRequest(req.method ?? 'GET', req.url ?? '/');
      bump('operations');
      bump(kind);
      const out = httpRequest(
        {
          host: '127.0.0.1',
          port: upstreamPort,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: `127.0.0.1:${upstreamPort}` },
        },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      out.on('error', () => {
        res.writeHead(502);
        res.end();
      });
      out.end(body);
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    snapshot: () => ({ ...counts }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
