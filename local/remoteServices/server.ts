import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { setMaxListeners } from 'node:events';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import {
  actionCompensatedBy,
  isCompensation,
  remoteOperations,
  remoteServiceNames,
  type RemoteAction,
  type RemoteOperation,
  type RemoteServiceName,
} from '../../shared/agents/remoteOperations.js';
import { FaultGrammarError, faultsFor, type RequestedFault } from './faultGrammar.js';
import { SideEffectLedger, type EffectRecord, type JsonObject, type LedgerSnapshot } from './ledger.js';
import { seededRandom } from './prng.js';
import { WebhookSender, type WebhookRecord } from './webhooks.js';
import {
  compensationRequestSchema,
  faultSettingsSchema,
  orderRequestSchema,
  type FaultSettings,
  type OrderRequest,
} from './schemas.js';

/**
 * A demo remote service (inventory, payment or shipping) on plain node:http. Every side effect is
 * recorded by idempotency key in a ledger, and faults are injected only when the order's SKUs or
 * the service's fault settings ask for them. See README.md for the API and the fault grammar.
 */

export interface RemoteServiceOptions {
  name: RemoteServiceName;
  /** 0 (the default) picks a free port. */
  port?: number;
  host?: string;
  faults?: FaultSettings;
  log?: (line: string) => void;
}

export interface RunningRemoteService {
  name: RemoteServiceName;
  url: string;
  port: number;
  ledger(): LedgerSnapshot;
  /** The W3C `traceparent` of each call received (the last 1,000), for checking propagation. */
  traceParents(): ReadonlyArray<{ operation: string; idempotencyKey: string; traceParent: string | null }>;
  /** Callbacks sent in webhook mode (the last 5,000), with each try's status. */
  webhooks(): ReadonlyArray<WebhookRecord>;
  setFaults(faults: FaultSettings): void;
  stop(): Promise<void>;
}

const maxBodyBytes = 1024 * 1024;

class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly slug: string,
    readonly title: string,
    readonly detail: string,
    readonly extra: JsonObject = {},
  ) {
    super(detail);
  }
}

interface Reply {
  status: number | null;
  outcome: string;
}

export async function startRemoteService(options: RemoteServiceOptions): Promise<RunningRemoteService> {
  const received: Array<{ operation: string; idempotencyKey: string; traceParent: string | null }> = [];
  const { name } = options;
  if (!remoteServiceNames.includes(name)) throw new Error(`unknown remote service: ${String(name)}`);
  const operations = remoteOperations[name];
  const ledger = new SideEffectLedger(name);
  const webhooks = new WebhookSender();
  const lifetime = new AbortController();
  // Every delayed request listens on this signal; a busy chaos run has many at once.
  setMaxListeners(0, lifetime.signal);
  let faults: FaultSettings = {};
  let random: () => number = Math.random;
  const setFaults = (next: FaultSettings): void => {
    faults = faultSettingsSchema.parse(next);
    random = faults.seed === undefined ? Math.random : seededRandom(faults.seed);
  };
  setFaults(options.faults ?? {});

  const respond = (
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ) => {
    if (res.writableEnded || res.destroyed) return;
    const type = status >= 400 ? 'application/problem+json' : 'application/json';
    res.writeHead(status, { 'content-type': type, ...headers });
    res.end(JSON.stringify(body));
  };

  const problem = (res: ServerResponse, p: HttpProblem, headers: Record<string, string> = {}) =>
    respond(
      res,
      p.status,
      {
        type: `urn:order-processing:problem:${p.slug}`,
        title: p.title,
        status: p.status,
        detail: p.detail,
        ...p.extra,
      },
      headers,
    );

  async function readJson(req: IncomingMessage): Promise<unknown> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > maxBodyBytes)
        throw new HttpProblem(413, 'body-too-large', 'Body too large', 'limit is 1 MiB');
      chunks.push(chunk as Buffer);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    try {
      return JSON.parse(text);
    } catch {
      throw new HttpProblem(400, 'invalid-json', 'Body is not JSON', 'send a JSON object');
    }
  }

  function parse<T>(schema: z.ZodType<T>, value: unknown): T {
    const parsed = schema.safeParse(value);
    if (!parsed.success) {
      throw new HttpProblem(400, 'invalid-body', 'Invalid request body', z.prettifyError(parsed.error));
    }
    return parsed.data;
  }

  /** Holds the request without answering until the client gives up (or the service stops). */
  function hang(res: ServerResponse): Promise<Reply> {
    return new Promise((resolve) => {
      const done = () => resolve({ status: null, outcome: 'hung until the client gave up' });
      // stop() destroys every open socket, which ends a hang too.
      res.once('close', done);
    });
  }

  async function handleOperation(req: IncomingMessage, res: ServerResponse, operation: RemoteOperation) {
    const body = await readJson(req);
    const header = req.headers['idempotency-key'];
    const key = typeof header === 'string' ? header.trim() : '';
    if (!key) {
      throw new HttpProblem(
        400,
        'missing-idempotency-key',
        'Idempotency-Key header required',
        'every call needs a key',
      );
    }
    const traceParent = req.headers['traceparent'];
    received.push({
      operation,
      idempotencyKey: key,
      traceParent: typeof traceParent === 'string' ? traceParent : null,
    });
    if (received.length > 1000) received.shift();
    const compensation = isCompensation(operation);
    const order: OrderRequest & { originalIdempotencyKey?: string } = compensation
      ? parse(compensationRequestSchema, body)
      : parse(orderRequestSchema, body);
    let requested: RequestedFault[];
    try {
      requested = faultsFor(
        name,
        order.items.map((i) => i.sku),
      );
    } catch (e) {
      if (e instanceof FaultGrammarError)
        throw new HttpProblem(400, 'invalid-fault-sku', 'Invalid fault SKU', e.message);
      throw e;
    }
    const attempt = ledger.nextAttempt(operation, key);
    const entry = ledger.logRequest({ operation, idempotencyKey: key, attempt });
    const reply = await perform(res, operation, key, attempt, order, requested);
    entry.status = reply.status;
    entry.outcome = reply.outcome;
    entry.answeredAt = new Date().toISOString();
    options.log?.(
      `${name} ${operation} key=${key} attempt=${attempt} -> ${reply.status ?? '-'} ${reply.outcome}`,
    );
  }

  async function perform(
    res: ServerResponse,
    operation: RemoteOperation,
    key: string,
    attempt: number,
    order: OrderRequest & { originalIdempotencyKey?: string },
    requested: RequestedFault[],
  ): Promise<Reply> {
    const has = (kind: RequestedFault['kind']) => requested.find((f) => f.kind === kind);
    const compensation = isCompensation(operation);
    const inject = (
      kind: string,
      status: number,
      title: string,
      headers: Record<string, string> = {},
    ): Reply => {
      ledger.countFault(kind);
      problem(
        res,
        new HttpProblem(status, `injected-${kind}`, title, `fault injected on attempt ${attempt}`),
        headers,
      );
      return { status, outcome: `injected ${kind}` };
    };

    const latency = (faults.latencyMs ?? 0) + Math.floor(random() * (faults.latencyJitterMs ?? 0));
    const slow = has('slow');
    const delay = latency + (slow?.n ?? 0);
    if (delay > 0) {
      if (slow) ledger.countFault('slow');
      try {
        await sleep(delay, undefined, { signal: lifetime.signal });
      } catch {
        return { status: null, outcome: 'service stopped' };
      }
    }

    if (faults.answerStatus !== undefined) {
      return inject(
        `status-${faults.answerStatus}`,
        faults.answerStatus,
        'Refused by service settings',
        faults.retryAfterSeconds !== undefined ? { 'retry-after': String(faults.retryAfterSeconds) } : {},
      );
    }

    const hangFault = compensation ? undefined : has('hang');
    if ((faults.hangRate && random() < faults.hangRate) || (hangFault && attempt <= hangFault.n)) {
      ledger.countFault('hang');
      return hang(res);
    }
    if (faults.transientRate && random() < faults.transientRate) return inject('transient', 503, 'Try again');

    if (!compensation) {
      if (has('permanent')) return inject('permanent', 422, 'Cannot do this, ever');
      const throttle = has('throttle');
      if (throttle && attempt <= throttle.n)
        return inject('throttle', 429, 'Too many requests', { 'retry-after': '1' });
      const transient = has('transient');
      if (transient && attempt <= transient.n) return inject('transient', 503, 'Try again');
    } else {
      if (has('compensation-fails')) return inject('compensation-fails', 422, 'Cannot compensate');
      const transient = has('compensation-transient');
      if (transient && attempt <= transient.n) return inject('compensation-transient', 503, 'Try again');
    }

    const outcome = compensation
      ? ledger.compensate(
          operation,
          actionCompensatedBy(operation),
          key,
          order.originalIdempotencyKey ?? '',
          order.orderId,
          (effect) => undo(operation, effect),
        )
      : ledger.performAction(operation as RemoteAction, key, order.orderId, () =>
          effectOf(operation as RemoteAction, key, order),
        );
    if (outcome.kind === 'refused') {
      const title = outcome.reason === 'tombstoned' ? 'Already compensated' : 'Idempotency-Key conflict';
      problem(res, new HttpProblem(409, outcome.reason, title, outcome.detail));
      return { status: 409, outcome: `refused: ${outcome.reason}` };
    }
    const lost = compensation ? undefined : has('lost-reply');
    if (lost && attempt <= lost.n) {
      ledger.countFault('lost-reply');
      res.destroy();
      return { status: null, outcome: `${outcome.kind}, reply lost on purpose` };
    }
    const callbackUrl = compensation ? undefined : (order as { callbackUrl?: unknown }).callbackUrl;
    if (typeof callbackUrl === 'string') return acceptForLater(res, callbackUrl, outcome.response, attempt);
    respond(res, 200, outcome.response);
    return { status: 200, outcome: outcome.kind };
  }

  /**
   * Webhook mode: 202 with the effect's id as the reference, the outcome POSTed later. A repeated
   * key (the Supervisor's retry) is answered the same way: the recorded outcome, called back again.
   */
  async function acceptForLater(
    res: ServerResponse,
    callbackUrl: string,
    effect: JsonObject,
    attempt: number,
  ): Promise<Reply> {
    const reference = String(Object.values(effect)[0] ?? 'ref');
    const body = { outcome: 'succeeded', reference, result: effect };
    const late = faults.callbackLateMs !== undefined && attempt <= (faults.callbackLateAttempts ?? 1);
    if (late) ledger.countFault('callback-late');
    const deliver = () =>
      webhooks.deliver(callbackUrl, body, {
        delayMs: late ? faults.callbackLateMs! : faults.callbackEarly ? 0 : (faults.callbackDelayMs ?? 500),
        copies: faults.callbackCopies ?? 1,
        signal: lifetime.signal,
        log: options.log,
      });
    const lost =
      faults.callbackLossRate !== undefined &&
      attempt <= (faults.callbackLossAttempts ?? Infinity) &&
      random() < faults.callbackLossRate;
    if (lost) {
      ledger.countFault('callback-lost');
      webhooks.recordLost(callbackUrl);
    } else if (faults.callbackEarly && !late) await deliver();
    respond(res, 202, { reference, status: 'pending' });
    if (!lost && (!faults.callbackEarly || late)) void deliver();
    return {
      status: 202,
      outcome: lost ? 'accepted, callback lost on purpose' : 'accepted, callback to follow',
    };
  }

  function effectOf(operation: RemoteAction, key: string, order: OrderRequest): JsonObject {
    const id = (prefix: string) =>
      `${prefix}_${createHash('sha256').update(`${name}\n${operation}\n${key}`).digest('hex').slice(0, 16)}`;
    switch (operation) {
      case 'reserve':
        return { reservationId: id('res'), orderId: order.orderId };
      case 'charge': {
        const cents = order.items.reduce((total, i) => total + Math.round(i.quantity * i.unitPrice * 100), 0);
        return { chargeId: id('ch'), orderId: order.orderId, amount: cents / 100 };
      }
      case 'create-shipment':
        return { shipmentId: id('shp'), orderId: order.orderId };
      default:
        // A step added to the workflow: its service answers with a plain effect id.
        return { effectId: id('eff'), orderId: order.orderId, operation };
    }
  }

  function undo(operation: RemoteOperation, effect: EffectRecord | undefined): JsonObject {
    if (!effect) return { tombstone: true, compensated: false };
    const r = effect.response;
    switch (operation) {
      case 'release':
        return { compensated: true, releasedReservationId: r.reservationId };
      case 'refund':
        return { compensated: true, refundId: `re_${String(r.chargeId).slice(3)}`, amount: r.amount };
      case 'cancel-shipment':
        return { compensated: true, cancelledShipmentId: r.shipmentId };
      default:
        return { compensated: true, undoneEffectId: r.effectId ?? null };
    }
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const method = req.method ?? 'GET';
    if (path === '/_admin/ledger' && method === 'GET') return respond(res, 200, ledger.snapshot());
    if (path === '/_admin/faults' && method === 'POST') {
      setFaults(parse(faultSettingsSchema, await readJson(req)));
      return respond(res, 200, { faults });
    }
    if (path === '/_admin/faults' && method === 'GET') return respond(res, 200, { faults });
    if (path === '/_admin/reset' && method === 'POST') {
      ledger.reset();
      return respond(res, 200, { reset: true });
    }
    if (path === '/_admin/webhooks' && method === 'GET') return respond(res, 200, { sent: webhooks.sent });
    if (path === '/health' && method === 'GET') return respond(res, 200, { service: name, ok: true });
    const operation = path.slice(1);
    if (operation === operations.action || operation === operations.compensation) {
      if (method !== 'POST') {
        throw new HttpProblem(405, 'method-not-allowed', 'Method not allowed', `use POST /${operation}`);
      }
      return handleOperation(req, res, operation);
    }
    throw new HttpProblem(
      404,
      'not-found',
      'No such operation',
      // A step without a compensation (a check that changes nothing) offers only its action.
      `${name} offers POST /${[operations.action, operations.compensation].filter(Boolean).join(' and POST /')}`,
    );
  }

  const server = createServer((req, res) => {
    route(req, res).catch((e: unknown) => {
      if (e instanceof HttpProblem) return problem(res, e);
      options.log?.(`${name} internal error: ${e instanceof Error ? e.stack : String(e)}`);
      problem(res, new HttpProblem(500, 'internal', 'Internal error', 'see the service log'));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port, address } = server.address() as AddressInfo;
  const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`;

  return {
    name,
    url,
    port,
    ledger: () => ledger.snapshot(),
    traceParents: () => [...received],
    webhooks: () => [...webhooks.sent],
    setFaults,
    stop: async () => {
      lifetime.abort();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

export type RemoteServicesOptions = Omit<RemoteServiceOptions, 'name' | 'port'> & {
  ports?: Partial<Record<RemoteServiceName, number>>;
};

export type RunningRemoteServices = Record<RemoteServiceName, RunningRemoteService> & {
  stop(): Promise<void>;
};

/** Starts one service per declared step's Agent; stops the ones that started if another fails. */
export async function startRemoteServices(
  options: RemoteServicesOptions = {},
): Promise<RunningRemoteServices> {
  const started: RunningRemoteService[] = [];
  try {
    for (const name of remoteServiceNames) {
      started.push(await startRemoteService({ ...options, name, port: options.ports?.[name] ?? 0 }));
    }
  } catch (e) {
    await Promise.all(started.map((s) => s.stop()));
    throw e;
  }
  return {
    ...(Object.fromEntries(started.map((s, i) => [remoteServiceNames[i], s])) as Record<
      RemoteServiceName,
      RunningRemoteService
    >),
    stop: async () => {
      await Promise.all(started.map((s) => s.stop()));
    },
  };
}
