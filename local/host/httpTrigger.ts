import { timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RegisteredFunction } from './coreApi.js';
import { InvocationError, type Invoker } from './invoker.js';
import type { LogSink } from './logger.js';
import { applyPlatformAuth, type LocalOperator } from './platformAuth.js';
import { refuseBearerToken, refuseFunctionKey } from './platformRefusal.js';
import { comparePrecedence, matchRoute, parseRouteTemplate, type RouteTemplate } from './routeTemplate.js';
import type { RpcHttpCookie, RpcHttpData, RpcTypedData } from './rpc.js';
import { httpTraceContext } from './traceContext.js';

/** Azure's default limit on request bodies (100 MB), unless FUNCTIONS_REQUEST_BODY_SIZE_LIMIT says otherwise. */
export const defaultMaxRequestBodyBytes = 100 * 1024 * 1024;

export type AuthLevel = 'anonymous' | 'function' | 'admin' | 'system';

export interface HttpRoute {
  fn: RegisteredFunction;
  name: string;
  route: RouteTemplate;
  methods: Set<string>;
  authLevel: AuthLevel;
  /** The name of the http output binding the response comes from (`$return` by default). */
  outputName: string | undefined;
  /** Set when the host does not run this function: its route answers 501 with this reason. */
  notRun?: string;
}

export interface HttpHostOptions {
  port: number;
  host: string;
  routePrefix: string;
  functionKey: string;
  /** The operator credential and the principal App Service Authentication would vouch for. */
  operator: LocalOperator;
  maxRequestBodyBytes: number;
  /** Set when the app called `app.setup({ enableHttpStream: true })`: the library's proxy. */
  streamProxyUri: string | undefined;
}

export function toHttpRoute(fn: RegisteredFunction, triggerName: string): HttpRoute {
  const binding = fn.metadata.bindings[triggerName];
  const routeText =
    typeof binding.route === 'string' && binding.route.trim() !== '' ? binding.route : fn.metadata.name;
  const methods =
    Array.isArray(binding.methods) && binding.methods.length > 0 ? binding.methods : ['GET', 'POST'];
  const authLevel = String(binding.authLevel ?? 'function').toLowerCase() as AuthLevel;
  if (!['anonymous', 'function', 'admin', 'system'].includes(authLevel)) {
    throw new Error(`Function "${fn.metadata.name}": unknown authLevel "${String(binding.authLevel)}".`);
  }
  const output = Object.entries(fn.metadata.bindings).find(
    ([, b]) => b.direction === 'out' && String(b.type).toLowerCase() === 'http',
  );
  return {
    fn,
    name: fn.metadata.name,
    route: parseRouteTemplate(routeText),
    methods: new Set(methods.map((m: unknown) => String(m).toUpperCase())),
    authLevel,
    outputName: output?.[0],
  };
}

function keyMatches(supplied: string | undefined, expected: string): boolean {
  if (supplied === undefined) return false;
  const a = Buffer.from(supplied);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

class BodyTooLarge extends Error {}

async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLarge();
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req) {
    total += (chunk as Buffer).length;
    if (total > limit) throw new BodyTooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function flattenHeaders(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return headers;
}

function flattenQuery(search: URLSearchParams): Record<string, string> {
  const query: Record<string, string> = {};
  for (const key of new Set(search.keys())) query[key] = search.getAll(key).join(',');
  return query;
}

function serializeCookie(cookie: RpcHttpCookie): string {
  const parts = [`${cookie.name ?? ''}=${cookie.value ?? ''}`];
  if (cookie.domain?.value) parts.push(`Domain=${cookie.domain.value}`);
  if (cookie.path?.value) parts.push(`Path=${cookie.path.value}`);
  if (cookie.expires?.value?.seconds)
    parts.push(`Expires=${new Date(cookie.expires.value.seconds * 1000).toUTCString()}`);
  if (typeof cookie.maxAge?.value === 'number') parts.push(`Max-Age=${Math.trunc(cookie.maxAge.value)}`);
  if (cookie.secure?.value) parts.push('Secure');
  if (cookie.httpOnly?.value) parts.push('HttpOnly');
  if (cookie.sameSite === 'lax') parts.push('SameSite=Lax');
  else if (cookie.sameSite === 'strict') parts.push('SameSite=Strict');
  else if (cookie.sameSite === 'explicitNone') parts.push('SameSite=None');
  return parts.join('; ');
}

function bodyBytes(data: RpcTypedData | null | undefined): Buffer {
  if (!data) return Buffer.alloc(0);
  if (data.bytes) return Buffer.from(data.bytes);
  if (typeof data.string === 'string') return Buffer.from(data.string);
  if (typeof data.json === 'string') return Buffer.from(data.json);
  return Buffer.alloc(0);
}

function writeRpcResponse(res: ServerResponse, data: RpcTypedData | null | undefined): void {
  const httpData = data?.http;
  if (!httpData) {
    // No response from the function: the host answers 204 No Content.
    res.writeHead(204).end();
    return;
  }
  const status = Number(httpData.statusCode ?? 200);
  for (const [name, value] of Object.entries(httpData.headers ?? {})) res.setHeader(name, value);
  const cookies = (httpData.cookies ?? []).map(serializeCookie);
  if (cookies.length > 0) res.setHeader('set-cookie', cookies);
  const body = bodyBytes(httpData.body);
  res.statusCode = Number.isInteger(status) && status >= 100 && status <= 999 ? status : 500;
  res.end(body);
}

/**
 * A function the local host does not run still owns its route, so a caller learns why instead of
 * meeting a 404 that suggests a wrong URL.
 */
function writeNotRun(res: ServerResponse, route: HttpRoute): void {
  const body = {
    type: 'about:blank',
    title: 'Not Implemented',
    status: 501,
    detail: `Function "${route.name}" is not run by the local host: ${route.notRun}. Run the app with Core Tools (npm run start:func) to use it.`,
    function: route.name,
  };
  res
    .writeHead(501, { 'content-type': 'application/problem+json', 'cache-control': 'no-store' })
    .end(JSON.stringify(body));
}

/** The HTTP front door: platform authentication, routing under the route prefix, function keys, body limit, invocation. */
export class HttpTriggerHost {
  private readonly server: http.Server;
  private readonly routes: HttpRoute[];
  private readonly sockets = new Set<import('node:net').Socket>();

  constructor(
    routes: HttpRoute[],
    private readonly options: HttpHostOptions,
    private readonly invoker: Invoker,
    private readonly log: LogSink,
  ) {
    this.routes = [...routes].sort((a, b) => comparePrecedence(a.route, b.route));
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        this.log({
          level: 'error',
          category: 'host',
          message: `HTTP request failed: ${(err as Error).stack ?? String(err)}`,
        });
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
    });
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    return (this.server.address() as AddressInfo).port;
  }

  /** Stops accepting connections; requests already inside finish (idle keep-alive sockets are dropped). */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    await closed;
  }

  /** Drops whatever connections remain after the grace period. */
  destroyConnections(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  urlOf(route: HttpRoute, baseUrl: string): string {
    const path = route.route.segments
      .map((s) =>
        s.kind === 'literal'
          ? s.text
          : `{${s.catchAll ? '*' : ''}${s.name}${s.optional && !s.catchAll ? '?' : ''}}`,
      )
      .join('/');
    return `${baseUrl}/${path}`;
  }

  private find(
    pathSegments: string[],
    method: string,
  ): { route: HttpRoute; params: Record<string, string> } | undefined {
    for (const route of this.routes) {
      if (!route.methods.has(method)) continue;
      const params = matchRoute(route.route, pathSegments);
      if (params) return { route, params };
    }
    return undefined;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (applyPlatformAuth(req.headers, this.options.operator) === 'invalid-token') {
      refuseBearerToken(res);
      return;
    }
    const hostHeader = req.headers.host ?? `${this.options.host}:${this.options.port}`;
    const url = new URL(req.url ?? '/', `http://${hostHeader}`);
    const method = (req.method ?? 'GET').toUpperCase();
    let segments: string[];
    try {
      segments = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    } catch {
      res.writeHead(400).end();
      return;
    }
    const prefix = this.options.routePrefix === '' ? [] : this.options.routePrefix.split('/');
    const underPrefix = prefix.every((p, i) => segments[i]?.toLowerCase() === p.toLowerCase());
    const found = underPrefix ? this.find(segments.slice(prefix.length), method) : undefined;
    if (!found) {
      // Azure answers 404 both for unknown paths and for a known path with a method it does not accept.
      res.writeHead(404).end();
      return;
    }
    const { route, params } = found;

    if (route.authLevel !== 'anonymous') {
      const headerKey = req.headers['x-functions-key'];
      const supplied =
        (Array.isArray(headerKey) ? headerKey[0] : headerKey) ?? url.searchParams.get('code') ?? undefined;
      if (!keyMatches(supplied, this.options.functionKey)) {
        refuseFunctionKey(res, supplied !== undefined);
        return;
      }
    }

    if (route.notRun !== undefined) {
      writeNotRun(res, route);
      req.resume();
      return;
    }

    if (this.options.streamProxyUri) {
      await this.invokeStreaming(route, params, req, res, url);
      return;
    }

    let body: Buffer;
    try {
      body = await readBody(req, this.options.maxRequestBodyBytes);
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        res.writeHead(413, { connection: 'close' }).end();
        req.resume();
        return;
      }
      throw err;
    }
    const httpData: RpcHttpData = {
      method,
      url: url.toString(),
      headers: flattenHeaders(req),
      query: flattenQuery(url.searchParams),
      params,
      body: body.length > 0 ? { bytes: body } : null,
    };
    try {
      const { response } = await this.invoker.invoke(route.fn, {
        data: { http: httpData },
        traceContext: httpTraceContext(req.headers),
        reason: `This function was programmatically called via the host APIs.`,
      });
      const output =
        route.outputName === undefined || route.outputName === '$return'
          ? response.returnValue
          : response.outputData?.find((o) => o.name === route.outputName)?.data;
      writeRpcResponse(res, output);
    } catch (err) {
      if (!(err instanceof InvocationError)) throw err;
      // Like Azure: a failed invocation is a bare 500; the details are in the log, never in the body.
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
  }

  /**
   * `app.setup({ enableHttpStream: true })`: the library runs its own HTTP proxy and reads the
   * request from it; the host forwards the raw request there and relays the streamed response.
   */
  private async invokeStreaming(
    route: HttpRoute,
    params: Record<string, string>,
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
  ): Promise<void> {
    const proxy = new URL(this.options.streamProxyUri as string);
    const triggerMetadata: Record<string, RpcTypedData> = {
      Headers: { json: JSON.stringify(flattenHeaders(req)) },
      Query: { json: JSON.stringify(flattenQuery(url.searchParams)) },
    };
    for (const [name, value] of Object.entries(params)) triggerMetadata[name] = { string: value };
    let responded = false;
    const invocation = this.invoker.invoke(route.fn, {
      data: { http: { method: req.method, url: url.toString() } },
      triggerMetadata,
      traceContext: httpTraceContext(req.headers),
      reason: 'This function was programmatically called via the host APIs.',
      onInvocationId: (invocationId) => {
        const forward = http.request({
          host: proxy.hostname === 'localhost' ? '127.0.0.1' : proxy.hostname,
          port: proxy.port,
          method: req.method,
          path: `${url.pathname}${url.search}`,
          headers: {
            ...req.headers,
            'x-ms-invocation-id': invocationId,
            'x-forwarded-host': url.host,
            'x-forwarded-proto': 'http',
          },
        });
        forward.on('response', (proxyRes) => {
          responded = true;
          const headers = { ...proxyRes.headers };
          delete headers['x-ms-invocation-id'];
          res.writeHead(proxyRes.statusCode ?? 200, headers);
          proxyRes.pipe(res);
        });
        forward.on('error', () => {
          if (!res.headersSent) res.writeHead(500);
          res.end();
        });
        req.pipe(forward);
        res.on('close', () => forward.destroy());
      },
    });
    try {
      await invocation;
      // The library writes the proxy response before the invocation resolves, unless the
      // handler returned nothing; give the response a moment to arrive, then answer 204.
      for (let waited = 0; !responded && waited < 2000; waited += 50) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      if (!responded && !res.headersSent) res.writeHead(204).end();
    } catch (err) {
      if (!(err instanceof InvocationError)) throw err;
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
  }
}
