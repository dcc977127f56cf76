import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defaultPorts, localAppSettings, servicePortFlag, type StackPorts } from './stack.js';
import { loadSettings, serviceUrlSetting, settingNames } from '../shared/config/settings.js';
import { remoteServiceNames } from '../shared/agents/remoteOperations.js';
import { telemetrySettingNames } from '../shared/observability/telemetry.js';
import { parseSigningKeys } from '../shared/config/waitingSettings.js';

/**
 * Command line and environment of `npm start`: ports, data folder, log level, the app settings
 * in effect and the function key. Pure parsing here; local/start.ts does the running.
 */

export type LogMode = 'quiet' | 'compact' | 'verbose';

export interface StartOptions {
  ports: StackPorts;
  /** Where Azurite's and the emulator's data, the function key and stack.json live. */
  dataDir: string;
  inMemory: boolean;
  logMode: LogMode;
  /** App settings over localAppSettings (from the environment). */
  settings: Record<string, string>;
  /** `--traces`: the app writes spans and metrics to this JSON-lines file. */
  telemetryFile?: string;
  /** `--storage-accounts`: orders spread over this many Azurite accounts (StateStoreAccounts). */
  storageAccounts: number;
}

export const maxLocalStorageAccounts = 8;

/** Where `--traces` writes, under the data folder; metrics are written this often. */
export const telemetryFileName = 'telemetry.jsonl';
export const localMetricsIntervalMs = 10_000;

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Flag, environment variable and stack port name of each port. */
export const portFlags: ReadonlyArray<{ port: keyof StackPorts; flag: string; env: string; what: string }> = [
  { port: 'http', flag: '--http-port', env: 'LOCAL_HTTP_PORT', what: 'the functions host (HTTP API)' },
  {
    port: 'serviceBus',
    flag: '--servicebus-port',
    env: 'LOCAL_SERVICEBUS_PORT',
    what: 'the Service Bus emulator',
  },
  { port: 'blob', flag: '--blob-port', env: 'LOCAL_BLOB_PORT', what: 'Azurite blob' },
  { port: 'queue', flag: '--queue-port', env: 'LOCAL_QUEUE_PORT', what: 'Azurite queue' },
  { port: 'table', flag: '--table-port', env: 'LOCAL_TABLE_PORT', what: 'Azurite table' },
  // One per declared step's Agent: --payment-port, LOCAL_PAYMENT_PORT.
  ...remoteServiceNames.map((name) => ({
    port: name,
    flag: servicePortFlag(name),
    env: `LOCAL_${name.toUpperCase().replace(/-/g, '_')}_PORT`,
    what: `the ${name} service`,
  })),
];

/** App settings a user may override from the environment (the connections are the stack's). */
export const tunableSettings = [
  settingNames.supervisorSchedule,
  settingNames.stepTimeoutSeconds,
  settingNames.claimTimeoutSeconds,
  settingNames.failureSoftThreshold,
  settingNames.failureHardThreshold,
  settingNames.extendedBackoffSeconds,
] as const;

export const startUsage = `usage: npm start -- [options]

  --in-memory            keep nothing: orders and messages are gone after a restart
  --data-dir <path>      data folder (default .data; env LOCAL_DATA_DIR)
  --quiet                print only the readiness block, warnings and errors
  --verbose              print every line of every part (host, Service Bus, Azurite, services)
  --storage-accounts <n> spread orders over n storage accounts of Azurite (default 1, at most ${maxLocalStorageAccounts}; env LOCAL_STORAGE_ACCOUNTS)
  --traces               write the app's spans and metrics to <data-dir>/${telemetryFileName} (JSON lines)
${portFlags.map((p) => `  ${`${p.flag} <n>`.padEnd(22)} ${p.what} (default ${defaultPorts[p.port]}; env ${p.env})`).join('\n')}

App settings from the environment: ${tunableSettings.join(', ')};
FUNCTIONS_LOCAL_KEY sets the function key (else one is generated once and kept in <data-dir>/function-key);
FUNCTIONS_LOCAL_OPERATOR_KEY sets the operator credential (else a new one each start).
`;

function parsePort(raw: string, source: string): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || !Number.isInteger(n) || n < 0 || n > 65535) {
    throw new UsageError(`${source} must be a port number from 0 to 65535, got "${raw}"`);
  }
  return n;
}

function parseAccounts(raw: string, source: string): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || n < 1 || n > maxLocalStorageAccounts) {
    throw new UsageError(
      `${source} must be a number of accounts from 1 to ${maxLocalStorageAccounts}, got "${raw}"`,
    );
  }
  return n;
}

/** Returns undefined for --help. Throws UsageError for anything it does not understand. */
export function parseStartArgs(
  argv: readonly string[],
  env: Record<string, string | undefined>,
  cwd = process.cwd(),
): StartOptions | undefined {
  const ports: StackPorts = { ...defaultPorts };
  for (const p of portFlags) {
    const raw = env[p.env];
    if (raw !== undefined && raw !== '') ports[p.port] = parsePort(raw, p.env);
  }
  let dataDir = env.LOCAL_DATA_DIR || '.data';
  let inMemory = false;
  let logMode: LogMode = 'compact';
  let traces = false;
  let storageAccounts = parseAccounts(env.LOCAL_STORAGE_ACCOUNTS || '1', 'LOCAL_STORAGE_ACCOUNTS');
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [flag, inline] =
      arg.startsWith('--') && arg.includes('=') ? arg.split(/=(.*)/s, 2) : [arg, undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new UsageError(`${flag} needs a value`);
      return v;
    };
    const portFlag = portFlags.find((p) => p.flag === flag);
    if (flag === '--help' || flag === '-h') return undefined;
    else if (portFlag) ports[portFlag.port] = parsePort(value(), portFlag.flag);
    else if (flag === '--in-memory') inMemory = true;
    else if (flag === '--data-dir') dataDir = value();
    else if (flag === '--quiet') logMode = 'quiet';
    else if (flag === '--verbose') logMode = 'verbose';
    else if (flag === '--traces') traces = true;
    else if (flag === '--storage-accounts') storageAccounts = parseAccounts(value(), '--storage-accounts');
    else throw new UsageError(`unknown option ${arg} (see --help)`);
  }
  const settings: Record<string, string> = {};
  for (const name of tunableSettings) {
    const v = env[name];
    if (v !== undefined && v.trim() !== '') settings[name] = v.trim();
  }
  checkSettings({ ...localAppSettings, ...settings });
  const resolvedDataDir = resolve(cwd, dataDir);
  if (!traces) return { ports, dataDir: resolvedDataDir, inMemory, logMode, settings, storageAccounts };
  const telemetryFile = join(resolvedDataDir, telemetryFileName);
  settings[telemetrySettingNames.file] = telemetryFile;
  settings[telemetrySettingNames.metricsIntervalMs] = String(localMetricsIntervalMs);
  return { ports, dataDir: resolvedDataDir, inMemory, logMode, settings, telemetryFile, storageAccounts };
}

/** Fails with the setting's name before anything starts (the host would fail later, less clearly). */
function checkSettings(settings: Record<string, string>): void {
  const placeholders = {
    [settingNames.serviceBus]:
      'Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;',
    [settingNames.stateStore]: 'UseDevelopmentStorage=true',
    ...Object.fromEntries(remoteServiceNames.map((name) => [serviceUrlSetting(name), 'http://127.0.0.1:1'])),
  };
  try {
    loadSettings({ ...placeholders, ...settings });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

const keyPattern = /^[A-Za-z0-9_-]{16,128}$/;

/**
 * The callback signing keys: CALLBACK_SIGNING_KEYS when set, else the key kept in
 * <dataDir>/callback-signing-key, else a new one written there. Kept so that a callback token
 * signed before a restart (a payment confirmed after it) is still accepted, not refused as forged.
 */
export function stableCallbackSigningKeys(
  dataDir: string,
  env: Record<string, string | undefined>,
): { keys: string; source: string } {
  const fromEnv = env.CALLBACK_SIGNING_KEYS?.trim();
  if (fromEnv) return { keys: fromEnv, source: 'CALLBACK_SIGNING_KEYS' };
  const file = join(dataDir, 'callback-signing-key');
  if (existsSync(file)) {
    const saved = readFileSync(file, 'utf8').trim();
    try {
      parseSigningKeys(saved);
      return { keys: saved, source: file };
    } catch {
      // garbled: replaced below (tokens signed with it are lost either way)
    }
  }
  const keys = `local:${randomBytes(32).toString('base64')}`;
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(file, `${keys}\n`, { mode: 0o600 });
  return { keys, source: `${file} (new)` };
}

/**
 * The function key: FUNCTIONS_LOCAL_KEY when set, else the one kept in <dataDir>/function-key,
 * else a new random one written there, so scripts and bookmarks keep working across restarts.
 */
export function stableFunctionKey(
  dataDir: string,
  env: Record<string, string | undefined>,
): { key: string; source: string } {
  const fromEnv = env.FUNCTIONS_LOCAL_KEY?.trim();
  if (fromEnv) return { key: fromEnv, source: 'FUNCTIONS_LOCAL_KEY' };
  const file = join(dataDir, 'function-key');
  if (existsSync(file)) {
    const saved = readFileSync(file, 'utf8').trim();
    if (keyPattern.test(saved)) return { key: saved, source: file };
  }
  const key = randomBytes(24).toString('base64url');
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return { key, source: `${file} (new)` };
}
