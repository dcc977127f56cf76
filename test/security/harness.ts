import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { HttpRequest, InvocationContext, type HttpResponseInit } from '@azure/functions';
import { startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../../emulators/servicebus/index.js';
import { makePolicy, orderWorkflowVersions, systemClock } from '../../shared/domain/index.js';
import { StateStore, StoreMetrics } from '../../shared/stateStore/index.js';
import { ServiceBusMessageBus } from '../../shared/messaging/bus.js';
import type { Dependencies } from '../../shared/app/ports.js';
import { withProblemErrors } from '../../shared/http/errors.js';

/**
 * Real Dependencies for driving the HTTP handlers directly: the state store on Azurite and the
 * bus on the Service Bus emulator, with counters to prove a refused request wrote nothing.
 */
export interface ApiHarness {
  deps: Dependencies;
  metrics: StoreMetrics;
  bus: ServiceBusMessageBus;
  /** Table writes (any non-GET request) plus Service Bus messages sent, so far. */
  writes(): number;
  stop(): Promise<void>;
}

const repoRoot = join(__dirname, '..', '..', '..');

export async function openApiHarness(): Promise<ApiHarness> {
  const azurite: AzuriteInstance = await startAzurite({ services: ['table'] });
  let serviceBus: ServiceBusEmulator | undefined;
  try {
    serviceBus = await startServiceBusEmulator({
      config: join(repoRoot, 'infra', 'servicebus-emulator', 'Config.json'),
      port: 0,
    });
    const metrics = new StoreMetrics();
    const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
    const store = await StateStore.open(
      { kind: 'connectionString', connectionString: azurite.connectionString },
      { ordersTable: `Orders${suffix}`, inFlightTable: `InFlight${suffix}`, metrics },
    );
    const bus = ServiceBusMessageBus.fromConnection({
      kind: 'connectionString',
      connectionString: serviceBus.connectionString,
    });
    const deps: Dependencies = {
      store,
      bus,
      clock: systemClock,
      policy: makePolicy({
        stepTimeoutSeconds: 60,
        failureSoftThreshold: 3,
        failureHardThreshold: 5,
        extendedBackoffSeconds: 60,
      }),
      workflows: orderWorkflowVersions,
    };
    const sb = serviceBus;
    return {
      deps,
      metrics,
      bus,
      writes: () =>
        Object.entries(metrics.byMethod)
          .filter(([method]) => method !== 'GET')
          .reduce((sum, [, n]) => sum + n, 0) + bus.counters.messages,
      stop: async () => {
        await bus.close().catch(() => undefined);
        await sb.stop();
        await azurite.stop();
      },
    };
  } catch (e) {
    await serviceBus?.stop();
    await azurite.stop();
    throw e;
  }
}

export function request(init: {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  params?: Record<string, string>;
  query?: Record<string, string>;
}): HttpRequest {
  const url = new URL(`http://127.0.0.1:7071/api${init.path}`);
  for (const [k, v] of Object.entries(init.query ?? {})) url.searchParams.set(k, v);
  return new HttpRequest({
    method: init.method,
    url: url.toString(),
    headers: init.headers,
    params: init.params,
    query: init.query,
    body:
      init.body === undefined
        ? undefined
        : typeof init.body === 'string'
          ? { string: init.body }
          : { bytes: init.body },
  });
}

/** The handlers' last few log lines (to explain an unexpected 5xx). */
export const lastLog: string[] = [];

/** Runs a handler the way functions/*.ts does: behind withProblemErrors. */
export function invoke(
  handler: (deps: Dependencies, req: HttpRequest, ctx: InvocationContext) => Promise<HttpResponseInit>,
  deps: Dependencies,
  req: HttpRequest,
): Promise<HttpResponseInit> {
  // The handlers log through the context; the last lines are kept for a failure message.
  const context = new InvocationContext({
    invocationId: randomUUID(),
    functionName: 'fuzz',
    logHandler: (_level, ...args) => {
      lastLog.push(args.map(String).join(' '));
      if (lastLog.length > 5) lastLog.shift();
    },
  });
  return withProblemErrors(context, () => handler(deps, req, context));
}

export const validOrder = {
  customerId: 'c-1',
  items: [{ sku: 'SKU-1', quantity: 1, unitPrice: 9.99 }],
  shippingAddress: { name: 'A', line1: 'Main St 1', city: 'Berlin', postalCode: '10115', country: 'DE' },
};
