import { z } from 'zod';

/**
 * App settings, read and validated once at start-up. A missing or malformed setting fails
 * with its name. Connection settings follow the Functions convention: a connection string
 * under the plain name locally, identity-based `<name>__...` settings in Azure.
 */

/** Every setting the app itself reads (the host's own, like AzureWebJobsStorage, aside). */
export const settingNames = {
  serviceBus: 'ServiceBusConnection',
  serviceBusNamespace: 'ServiceBusConnection__fullyQualifiedNamespace',
  stateStore: 'StateStoreConnection',
  stateStoreTableUri: 'StateStoreConnection__tableServiceUri',
  inventoryUrl: 'INVENTORY_SERVICE_URL',
  paymentUrl: 'PAYMENT_SERVICE_URL',
  shippingUrl: 'SHIPPING_SERVICE_URL',
  supervisorSchedule: 'SUPERVISOR_SCHEDULE',
  stepTimeoutSeconds: 'STEP_TIMEOUT_SECONDS',
  failureSoftThreshold: 'FAILURE_SOFT_THRESHOLD',
  failureHardThreshold: 'FAILURE_HARD_THRESHOLD',
  extendedBackoffSeconds: 'EXTENDED_BACKOFF_SECONDS',
  serviceOutageAlertThreshold: 'SERVICE_OUTAGE_ALERT_THRESHOLD',
} as const;

export type ServiceBusConnection =
  | { kind: 'connectionString'; connectionString: string }
  | { kind: 'identity'; fullyQualifiedNamespace: string };

export type StateStoreConnection =
  { kind: 'connectionString'; connectionString: string } | { kind: 'identity'; tableServiceUri: string };

export interface Settings {
  serviceBus: ServiceBusConnection;
  stateStore: StateStoreConnection;
  remoteServices: { inventory: string; payment: string; shipping: string };
  supervisorSchedule: string;
  stepTimeoutSeconds: number;
  failureSoftThreshold: number;
  failureHardThreshold: number;
  extendedBackoffSeconds: number;
  /** Consecutive operational failures at one remote service that raise its outage alert. */
  serviceOutageAlertThreshold: number;
}

export class SettingsError extends Error {
  constructor(
    public readonly setting: string,
    problem: string,
  ) {
    super(`App setting ${setting}: ${problem}`);
    this.name = 'SettingsError';
  }
}

type Env = Record<string, string | undefined>;

function read(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function required(env: Env, name: string): string {
  const value = read(env, name);
  if (value === undefined) throw new SettingsError(name, 'is missing');
  return value;
}

const httpUrl = z.url({ protocol: /^https?$/ });

function url(env: Env, name: string): string {
  const value = required(env, name);
  if (!httpUrl.safeParse(value).success) throw new SettingsError(name, `is not an http(s) URL: ${value}`);
  return value.replace(/\/+$/, '');
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new SettingsError(name, `must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function serviceBus(env: Env): ServiceBusConnection {
  const cs = read(env, settingNames.serviceBus);
  if (cs) return { kind: 'connectionString', connectionString: cs };
  const ns = read(env, settingNames.serviceBusNamespace);
  if (ns) return { kind: 'identity', fullyQualifiedNamespace: ns };
  throw new SettingsError(
    settingNames.serviceBus,
    `is missing (set it to a connection string locally, or ${settingNames.serviceBusNamespace} in Azure)`,
  );
}

function stateStore(env: Env): StateStoreConnection {
  const cs = read(env, settingNames.stateStore);
  if (cs) return { kind: 'connectionString', connectionString: cs };
  const uri = read(env, settingNames.stateStoreTableUri);
  if (uri) {
    if (!httpUrl.safeParse(uri).success) {
      throw new SettingsError(settingNames.stateStoreTableUri, `is not an http(s) URL: ${uri}`);
    }
    return { kind: 'identity', tableServiceUri: uri };
  }
  throw new SettingsError(
    settingNames.stateStore,
    `is missing (set it to a connection string locally, or ${settingNames.stateStoreTableUri} in Azure)`,
  );
}

/** Parses settings from an environment; throws SettingsError naming the first bad setting. */
export function loadSettings(env: Env = process.env): Settings {
  const soft = integer(env, settingNames.failureSoftThreshold, 3, 1, 100);
  const hard = integer(env, settingNames.failureHardThreshold, 5, 1, 100);
  if (hard < soft) {
    throw new SettingsError(
      settingNames.failureHardThreshold,
      `must be at least ${settingNames.failureSoftThreshold} (${soft}), got ${hard}`,
    );
  }
  return {
    serviceBus: serviceBus(env),
    stateStore: stateStore(env),
    remoteServices: {
      inventory: url(env, settingNames.inventoryUrl),
      payment: url(env, settingNames.paymentUrl),
      shipping: url(env, settingNames.shippingUrl),
    },
    supervisorSchedule: read(env, settingNames.supervisorSchedule) ?? '*/30 * * * * *',
    stepTimeoutSeconds: integer(env, settingNames.stepTimeoutSeconds, 60, 1, 3600),
    failureSoftThreshold: soft,
    failureHardThreshold: hard,
    extendedBackoffSeconds: integer(env, settingNames.extendedBackoffSeconds, 120, 0, 86_400),
    serviceOutageAlertThreshold: integer(env, settingNames.serviceOutageAlertThreshold, 5, 1, 1000),
  };
}

let cached: Settings | undefined;

/** The process-wide settings, loaded on first use. */
export function settings(): Settings {
  cached ??= loadSettings();
  return cached;
}

/** For tests and the local host, which change the environment between runs. */
export function resetSettingsCache(): void {
  cached = undefined;
}
