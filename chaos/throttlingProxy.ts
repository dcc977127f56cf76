import { randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { seededRandom } from '../local/remoteServices/prng.js';

/**
 * An HTTP proxy in front of Azurite's table endpoint that throttles like Azure Storage under
 * load: a share of requests is answered at once, without reaching the server, with 503
 * ServerBusy (or, one in four of those, 500 OperationTimedOut), in the storage service's JSON
 * error shape and `x-ms-error-code` header. Nothing was written for those, so the client's retry
 * is the whole remedy; the rest is forwarded untouched.
 */
export interface ThrottlingProxy {
  port: number;
  /** Requests answered with a throttling error so far. */
  throttled(): number;
  /** Requests forwarded to the server so far. */
  forwarded(): number;
  /** Share of requests to throttle from now on (0 stops throttling). */
  setRate(rate: number): void;
  close(): Promise<void>;
}

async function readAll(stream: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function storageError(code: 'ServerBusy' | 'OperationTimedOut', message: string): string {
  const value = `${message}\nRequestId:${randomUUID()}\nTime:${new Date().toISOString()}`;
  return JSON.stringify({ 'odata.error': { code, message: { lang: 'en-US', value } } });
}

export async function startThrottlingProxy(
  target: { host: string; port: number },
  options: { rate: number; seed?: number },
): Promise<ThrottlingProxy> {
  let rate = options.rate;
  const random = options.seed === undefined ? Math.random : seededRandom(options.seed);
  let throttled = 0;
  let forwarded = 0;
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readAll(req);
      if (random() < rate) {
        throttled += 1;
        const timedOut = throttled % 4 === 0;
        const code = timedOut ? 'OperationTimedOut' : 'ServerBusy';
        res.writeHead(timedOut ? 500 : 503, {
          'content-type': 'application/json;odata=minimalmetadata;streaming=true;charset=utf-8',
          'x-ms-error-code': code,
          'x-ms-request-id': randomUUID(),
        });
        res.end(
          storageError(
            code,
            timedOut ? 'Operation could not be completed within the specified time.' : 'The server is busy.',
          ),
        );
        return;
      }
      forwarded += 1;
      const out = httpRequest(
        {
          host: target.host,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: `${target.host}:${target.port}` },
        },
        (up) => {
          void (async () => {
            const payload = await readAll(up);
            res.writeHead(up.statusCode ?? 502, up.headers);
            res.end(payload);
          })().catch(() => res.destroy());
        },
      );
      out.on('error', () => res.destroy());
      out.end(body);
    })().catch(() => res.destroy());
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    throttled: () => throttled,
    forwarded: () => forwarded,
    setRate: (next) => {
      rate = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
