import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startAzurite, type AzuriteInstance } from './azurite.js';
import { startRemoteServices } from './remoteServices/index.js';
import type { FaultSettings } from './remoteServices/index.js';
import { spawnLocalHost, type SpawnedLocalHost } from './host/index.js';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../emulators/servicebus/index.js';
import { assertPortFree } from './ports.js';
import { remoteServiceNames, type RemoteServiceName } from '../shared/agents/remoteOperations.js';
import { serviceUrlSetting } from '../shared/config/settings.js';

/**
 * The whole system on one machine, no cloud: Azurite (tables, blobs, queues), the Service Bus
 * emulator with the app's Config.json, the demo remote services, and the local functions host
 * running the app's own registrations in a child process (so it can be killed and restarted
 * like a crashed worker). `npm start`, the demo, the end-to-end tests, the chaos suite and the
 * benchmarks all start it through here.
 */
export type StackPorts = {
  http: number;
  serviceBus: number;
  blob: number;
  queue: number;
  table: number;
} & Record<RemoteServiceName, number>;

/** The demo service of each declared step's Agent listens on 7101, 7102, ... in step order. */
export const defaultPorts: StackPorts = {
  http: 7071,
  serviceBus: 5672,
  blob: 10000,
  queue: 10001,
  table: 10002,
  ...(Object.fromEntries(remoteServiceNames.map((name, i) => [name, 7101 + i])) as Record<
    RemoteServiceName,
    number
  >),
};

/** The flag that sets a demo service's port (`--payment-port`). */
export function servicePortFlag(name: RemoteServiceName): string {
  return `--${name}-port`;
}

/** Each Agent's service URL setting, pointing at the running demo services. */
export function serviceUrlSettings(
  remote: Record<RemoteServiceName, { url: string }>,
): Record<string, string> {
  return Object.fromEntries(remoteServiceNames.map((name) => [serviceUrlSetting(name), remote[name].url]));
}

function servicePorts(ports: StackPorts): Record<RemoteServiceName, number> {
  return Object.fromEntries(remoteServiceNames.map((name) => [name, ports[name]])) as Record<
    RemoteServiceName,
    number
  >;
}

/** Every port 0: for tests, so runs never collide. */
export const randomPorts: StackPorts = Object.fromEntries(
  Object.keys(defaultPorts).map((k) => [k, 0]),
) as unknown as StackPorts;

/** Settings the local stack gives the app unless told otherwise: quick enough to watch. */
export const localAppSettings: Record<string, string> = {
  SUPERVISOR_SCHEDULE: '*/5 * * * * *',
  STEP_TIMEOUT_SECONDS: '15',
  FAILURE_SOFT_THRESHOLD: '3',
  FAILURE_HARD_THRESHOLD: '5',
  EXTENDED_BACKOFF_SECONDS: '10',
  // As in local.settings.sample.json and Azure: the host refuses bodies over 1 MiB unread.
  FUNCTIONS_REQUEST_BODY_SIZE_LIMIT: '1048576',
  // A fresh callback signing key per process (local only; Azure's comes from Key Vault).
  CALLBACK_SIGNING_KEYS: `local:${randomBytes(32).toString('base64')}`,
};

export interface StackOptions {
  ports?: Partial<StackPorts>;
  /** Folder for Azurite's data (and the emulator's, with persistServiceBus); in memory when absent. */
  dataDir?: string;
  /**
   * Also keep Service Bus messages in <dataDir>/servicebus (the emulator's persistence). Off by
   * default here so tests get Microsoft's emulator behaviour; `npm start` turns it on. Orders
   * survive either way: they live in Table Storage and the Supervisor re-drives every in-flight
   * order whose messages were lost once its complete-by passes.
   */
  persistServiceBus?: boolean;
  /** The function app's root (package.json with `main`, host.json). Default: this repo. */
  appRoot?: string;
  /** App settings over localAppSettings (e.g. a short STEP_TIMEOUT_SECONDS for tests). */
  settings?: Record<string, string>;
  functionKey?: string;
  /** The operator credential; default FUNCTIONS_LOCAL_OPERATOR_KEY, else random. */
  operatorKey?: string;
  remoteFaults?: FaultSettings;
  /** Lines from every part, prefixed with the part's name. */
  log?: (line: string) => void;
  /**
   * Child processes (Azurite, the host) in their own process groups, so a terminal's Ctrl-C
   * reaches only this process and it can stop them in order (npm start). The caller must then
   * stop the stack on SIGINT/SIGTERM/SIGHUP itself.
   */
  ownProcessGroups?: boolean;
  /** The emulator's throttling hook (the bench's scaled-down Service Bus credits). */
  serviceBusRefuseSend?: (entity: string, messageId: string | undefined) => boolean;
  /** Storage accounts orders are spread over (StateStoreAccounts); Azurite serves them all. Default 1. */
  storageAccounts?: number;
}

export interface Stack {
  /** http://127.0.0.1:port/api */
  baseUrl: string;
  functionKey: string;
  /** The operator credential (Authorization: Bearer) the local host accepts for operator routes. */
  operatorKey: string;
  ports: StackPorts;
  /** The app settings the host runs with (connection strings included). */
  env: Record<string, string>;
  azurite: AzuriteInstance;
  serviceBus: ServiceBusEmulator;
  remote: Awaited<ReturnType<typeof startRemoteServices>>;
  host(): SpawnedLocalHost | undefined;
  /** Starts the functions host again (after killHost), on the same port and settings. */
  startHost(): Promise<SpawnedLocalHost>;
  /** Kills the host process; SIGKILL simulates a crashed worker. */
  killHost(signal?: NodeJS.Signals): Promise<void>;
  stop(): Promise<void>;
}

const repoRoot = resolve(__dirname, '..', '..');

/** The Azurite accounts after devstoreaccount1 that a local state store of n accounts uses. */
export function localOrderAccounts(n: number): string[] {
  return Array.from({ length: Math.max(0, n - 1) }, (_, i) => `orders${i + 2}`);
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const ports = { ...defaultPorts, ...options.ports };
  const log = options.log ?? (() => undefined);
  const appRoot = options.appRoot ?? repoRoot;
  await assertPortFree(ports.http, 'the functions host', '--http-port');
  await assertPortFree(ports.serviceBus, 'the Service Bus emulator', '--servicebus-port');
  await assertPortFree(ports.blob, 'Azurite blob', '--blob-port');
  await assertPortFree(ports.queue, 'Azurite queue', '--queue-port');
  await assertPortFree(ports.table, 'Azurite table', '--table-port');
  for (const name of remoteServiceNames)
    await assertPortFree(ports[name], `the ${name} service`, servicePortFlag(name));

  const started: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of started.reverse()) await stop().catch(() => undefined);
  };
  try {
    let azuriteDir: string | undefined;
    let busDir: string | undefined;
    if (options.dataDir) {
      azuriteDir = join(options.dataDir, 'azurite');
      mkdirSync(azuriteDir, { recursive: true });
      if (options.persistServiceBus) {
        busDir = join(options.dataDir, 'servicebus');
        mkdirSync(busDir, { recursive: true });
      }
    }
    const azurite = await startAzurite({
      services: ['blob', 'queue', 'table'],
      location: azuriteDir,
      ports: { blob: ports.blob, queue: ports.queue, table: ports.table },
      ownProcessGroup: options.ownProcessGroups,
      extraAccounts: localOrderAccounts(options.storageAccounts ?? 1),
    });
    started.push(() => azurite.stop());
    log(`[azurite] tables ${azurite.tableUrl}`);

    const serviceBus = await startServiceBusEmulator({
      config: join(appRoot, 'infra', 'servicebus-emulator', 'Config.json'),
      port: ports.serviceBus,
      dataDir: busDir,
      log: (line) => log(`[servicebus] ${line}`),
      refuseSend: options.serviceBusRefuseSend,
    });
    started.push(() => serviceBus.stop());

    const remote = await startRemoteServices({
      ports: servicePorts(ports),
      faults: options.remoteFaults,
      log: (line) => log(`[remote] ${line}`),
    });
    started.push(() => remote.stop());

    const env: Record<string, string> = {
      FUNCTIONS_WORKER_RUNTIME: 'node',
      AzureWebJobsStorage: azurite.connectionString,
      ServiceBusConnection: serviceBus.connectionString,
      StateStoreConnection: azurite.connectionString,
      ...((options.storageAccounts ?? 1) > 1
        ? {
            StateStoreAccounts: [
              azurite.connectionString,
              ...localOrderAccounts(options.storageAccounts ?? 1).map((a) =>
                azurite.tableConnectionString(a),
              ),
            ].join(','),
          }
        : {}),
      ...serviceUrlSettings(remote),
      ...localAppSettings,
      ...options.settings,
    };
    if (options.functionKey) env.FUNCTIONS_LOCAL_KEY = options.functionKey;
    if (options.operatorKey) env.FUNCTIONS_LOCAL_OPERATOR_KEY = options.operatorKey;

    let host: SpawnedLocalHost | undefined;
    let httpPort = ports.http;
    const startHost = async () => {
      host = await spawnLocalHost({
        appRoot,
        env,
        httpPort,
        onLine: (line) => log(`[host] ${line}`),
        ownProcessGroup: options.ownProcessGroups,
      });
      httpPort = host.httpPort; // a restart reuses the port the first start got
      env.FUNCTIONS_LOCAL_KEY = host.functionKey;
      env.FUNCTIONS_LOCAL_OPERATOR_KEY = host.operatorKey;
      return host;
    };
    const first = await startHost();
    started.push(async () => {
      if (host) await host.kill('SIGTERM');
    });

    return {
      baseUrl: first.baseUrl,
      functionKey: first.functionKey,
      operatorKey: first.operatorKey,
      ports: {
        ...ports,
        http: first.httpPort,
        serviceBus: serviceBus.port,
        ...(Object.fromEntries(remoteServiceNames.map((name) => [name, remote[name].port])) as Record<
          RemoteServiceName,
          number
        >),
      },
      env,
      azurite,
      serviceBus,
      remote,
      host: () => host,
      startHost,
      killHost: async (signal = 'SIGKILL') => {
        const h = host;
        host = undefined;
        if (h) await h.kill(signal);
      },
      stop: stopAll,
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}
