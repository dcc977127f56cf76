import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Cron } from 'croner';
import { z } from 'zod';
import { defaultStatusEventLevel, statusEventLevels, type StatusEventLevel } from '../domain/statusEvents.js';
import { orderWorkflow, type OrderAgentName } from '../domain/orderWorkflow.js';
import { camelCase, duplicateDetectionWindowSeconds } from '../messaging/entities.js';
import {
  namespaceProblem,
  serviceBusConnectionProblem,
  storageConnectionProblem,
} from './connectionStrings.js';
import { defaultIndexPartitions, maxIndexPartitions } from '../stateStore/indexLayout.js';
import { accountKey, parseStateStoreAccounts } from './stateStoreAccounts.js';
import { retentionSettings, type RetentionSettings } from './retentionSettings.js';

/**
 * App settings, read and validated once at start-up. A missing or malformed setting fails
 * with its name. Connection settings follow the Functions convention: a connection string
 * under the plain name locally, identity-based `<name>__...` settings in Azure.
 */

/** The setting that holds the base URL of an Agent's remote service: `fraud-check` → FRAUD_CHECK_SERVICE_URL. */
export function serviceUrlSetting(agent: string): string {
  return `${agent.toUpperCase().replace(/-/g, '_')}_SERVICE_URL`;
}

/** One service URL setting per declared step's Agent, keyed `inventoryUrl`, `paymentUrl`, ... */
const serviceUrlSettings = Object.fromEntries(
  orderWorkflow.steps.map((s) => [`${camelCase(s.agent)}Url`, serviceUrlSetting(s.agent)]),
) as { readonly [A in OrderAgentName as `${ReturnType<typeof camelCase<A>>}Url`]: string };

/** Every setting the app itself reads (the host's own, like AzureWebJobsStorage, aside). */
export const settingNames = {
  serviceBus: 'ServiceBusConnection',
  serviceBusNamespace: 'ServiceBusConnection__fullyQualifiedNamespace',
  stateStore: 'StateStoreConnection',
  stateStoreTableUri: 'StateStoreConnection__tableServiceUri',
  stateStoreAccounts: 'StateStoreAccounts',
  ...serviceUrlSettings,
  supervisorSchedule: 'SUPERVISOR_SCHEDULE',
  stepTimeoutSeconds: 'STEP_TIMEOUT_SECONDS',
  claimTimeoutSeconds: 'CLAIM_TIMEOUT_SECONDS',
  failureSoftThreshold: 'FAILURE_SOFT_THRESHOLD',
  failureHardThreshold: 'FAILURE_HARD_THRESHOLD',
  extendedBackoffSeconds: 'EXTENDED_BACKOFF_SECONDS',
  statusEvents: 'STATUS_EVENTS',
  serviceOutageAlertThreshold: 'SERVICE_OUTAGE_ALERT_THRESHOLD',
  admissionBacklogLimitSeconds: 'ADMISSION_BACKLOG_LIMIT_SECONDS',
  operatorBulkRatePerSecond: 'OPERATOR_BULK_RATE_PER_SECOND',
  customerIntakePerSecond: 'CUSTOMER_INTAKE_PER_SECOND',
  customerIntakeMaxWaitSeconds: 'CUSTOMER_INTAKE_MAX_WAIT_SECONDS',
  customerSubmissionsAtOnce: 'CUSTOMER_SUBMISSIONS_AT_ONCE',
  orderIndexPartitions: 'ORDER_INDEX_PARTITIONS',
  orderRetentionDays: 'ORDER_RETENTION_DAYS',
  idempotencyRetentionDays: 'IDEMPOTENCY_RETENTION_DAYS',
  orderPurgeRatePerSecond: 'ORDER_PURGE_RATE_PER_SECOND',
  orderArchive: 'ORDER_ARCHIVE',
  orderArchiveBlobUri: 'OrderArchiveConnection__blobServiceUri',
} as const;

export type ServiceBusConnection =
  | { kind: 'connectionString'; connectionString: string }
  | { kind: 'identity'; fullyQualifiedNamespace: string };

export type StateStoreConnection =
  { kind: 'connectionString'; connectionString: string } | { kind: 'identity'; tableServiceUri: string };

export interface Settings {
  serviceBus: ServiceBusConnection;
  stateStore: StateStoreConnection;
  /** The accounts orders are spread over, the stateStore one first (StateStoreAccounts; at least it). */
  stateStoreAccounts: StateStoreConnection[];
  /** Base URL of each Agent's remote service, by Agent name (from the step declarations). */
  remoteServices: Record<OrderAgentName, string>;
  supervisorSchedule: string;
  stepTimeoutSeconds: number;
  /** How long a Pending order may wait for a Scheduler before its claim is re-sent (never a failure). */
  claimTimeoutSeconds: number;
  failureSoftThreshold: number;
  failureHardThreshold: number;
  extendedBackoffSeconds: number;
  statusEvents: StatusEventLevel;
  /** host.json functionTimeout: no invocation (a stalled submission, say) outlives it. */
  functionTimeoutSeconds?: number;
  /** Consecutive operational failures at one remote service that raise its outage alert. */
  serviceOutageAlertThreshold: number;
  /**
   * The submission door: new orders get 503 while the scheduler queue's oldest waiting message is
   * older than this; 0 keeps the door open. Default: hard threshold x claim timeout, the wait
   * after which, before claim timeouts stopped counting as failures, a backlog gave orders up.
   */
  admissionBacklogLimitSeconds: number;
  /** Orders a confirmed bulk action (resubmit, cancel, retry) acts on per second at most. */
  operatorBulkRatePerSecond: number;
  /**
   * Each customer's orders reach the Scheduler at most this many a second from one instance, after
   * a burst of as many (domain/customerIntake.ts); 0 (the default) paces nobody.
   */
  customerIntakePerSecond: number;
  /**
   * The longest a customer's order may wait for its turn: a later turn is refused (429). Default:
   * the door's limit (an hour when the door is off); 0 refuses every order past the burst.
   */
  customerIntakeMaxWaitSeconds: number;
  /**
   * Each customer's submissions in progress at once at one instance; the rest wait in the
   * customer's line (http/submissionLine.ts). 0 turns the line off.
   */
  customerSubmissionsAtOnce: number;
  /** Partitions per process state of the operator's state index (docs/state-store.md). */
  orderIndexPartitions: number;
  /** Retention, archive and purge (docs/operations.md "Retention"; retentionSettings.ts). */
  retention: RetentionSettings;
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

/** An integer setting within [min, max], or `fallback` when unset; out of range fails naming it. */
export function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new SettingsError(name, `must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new SettingsError(name, `must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw as T;
}

function serviceBus(env: Env): ServiceBusConnection {
  const cs = read(env, settingNames.serviceBus);
  if (cs) {
    const problem = serviceBusConnectionProblem(cs);
    if (problem) throw new SettingsError(settingNames.serviceBus, problem);
    return { kind: 'connectionString', connectionString: cs };
  }
  const ns = read(env, settingNames.serviceBusNamespace);
  if (ns) {
    const problem = namespaceProblem(ns);
    if (problem) throw new SettingsError(settingNames.serviceBusNamespace, problem);
    return { kind: 'identity', fullyQualifiedNamespace: ns };
  }
  throw new SettingsError(
    settingNames.serviceBus,
    `is missing (set it to a connection string locally, or ${settingNames.serviceBusNamespace} in Azure)`,
  );
}

function stateStore(env: Env): StateStoreConnection {
  const cs = read(env, settingNames.stateStore);
  if (cs) {
    const problem = storageConnectionProblem(cs);
    if (problem) throw new SettingsError(settingNames.stateStore, problem);
    return { kind: 'connectionString', connectionString: cs };
  }
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

/** StateStoreAccounts when set (its first entry must be the stateStore account), else that one alone. */
function stateStoreAccounts(env: Env, first: StateStoreConnection): StateStoreConnection[] {
  const value = read(env, settingNames.stateStoreAccounts);
  if (value === undefined) return [first];
  const parsed = parseStateStoreAccounts(value);
  if (typeof parsed === 'string') throw new SettingsError(settingNames.stateStoreAccounts, parsed);
  if (accountKey(parsed[0]) !== accountKey(first)) {
    throw new SettingsError(
      settingNames.stateStoreAccounts,
      `its first entry must be the ${first.kind === 'identity' ? settingNames.stateStoreTableUri : settingNames.stateStore} account (the orders stored before the spread live there)`,
    );
  }
  return parsed;
}

/** The Supervisor's schedule when SUPERVISOR_SCHEDULE is not set (README, docs/local-run.md). */
export const defaultSupervisorSchedule = '*/30 * * * * *';

/**
 * A schedule the Functions host accepts: six-field NCRONTAB (UTC) or a TimeSpan interval. Checked
 * here so a bad one names this setting, before the host tries to index the timer.
 */
function schedule(env: Env, name: string): string {
  const value = read(env, name) ?? defaultSupervisorSchedule;
  if (/^(\d+\.)?\d{1,2}:\d{2}:\d{2}$/.test(value)) return value;
  const fields = value.split(/\s+/);
  if (fields.length !== 6) {
    throw new SettingsError(
      name,
      `must be a six-field NCRONTAB expression {second} {minute} {hour} {day} {month} {day-of-week} or hh:mm:ss, got "${value}"`,
    );
  }
  try {
    new Cron(value, { paused: true, timezone: 'UTC', mode: '6-part' }).stop();
  } catch (e) {
    throw new SettingsError(name, `is not a valid NCRONTAB expression "${value}": ${(e as Error).message}`);
  }
  return value;
}

/** The host.json limits a setting combination must fit in (seconds; Infinity when unlimited). */
export interface HostLimits {
  /** `functionTimeout`: the host stops an invocation (an Agent mid-call) after this. */
  functionTimeoutSeconds: number;
  /** `extensions.serviceBus.maxAutoLockRenewalDuration`: a message lock is renewed this long. */
  maxAutoLockRenewalSeconds: number;
  /** Where they were read from, for the error message. */
  source: string;
}

/** Parses a host.json TimeSpan ("00:10:00", "1.02:00:00", "-1" for unlimited) into seconds. */
export function timeSpanSeconds(value: unknown, name: string): number {
  if (value === '-1' || value === -1) return Infinity;
  const m =
    typeof value === 'string' ? /^(?:(\d+)\.)?(\d{1,2}):(\d{2}):(\d{2}(?:\.\d+)?)$/.exec(value) : null;
  if (!m) throw new SettingsError(name, `is not a TimeSpan (hh:mm:ss): ${JSON.stringify(value)}`);
  return Number(m[1] ?? 0) * 86_400 + Number(m[2]) * 3600 + Number(m[3]) * 60 + Number(m[4]);
}

/**
 * Reads the limits from host.json: the script root's (AzureWebJobsScriptRoot, set by the Functions
 * host) or else the one next to the compiled app. The Functions defaults apply to what it omits.
 */
export function readHostLimits(env: Env = process.env): HostLimits {
  const root = read(env, 'AzureWebJobsScriptRoot') ?? resolve(__dirname, '..', '..', '..');
  const source = join(root, 'host.json');
  let host: {
    functionTimeout?: unknown;
    extensions?: { serviceBus?: { maxAutoLockRenewalDuration?: unknown } };
  };
  try {
    host = JSON.parse(readFileSync(source, 'utf8')) as typeof host;
  } catch (e) {
    throw new SettingsError('host.json', `cannot be read at ${source}: ${(e as Error).message}`);
  }
  return {
    // Consumption plan default; Flex and dedicated plans default higher, so this errs on the safe side.
    functionTimeoutSeconds: timeSpanSeconds(host.functionTimeout ?? '00:05:00', 'host.json functionTimeout'),
    maxAutoLockRenewalSeconds: timeSpanSeconds(
      host.extensions?.serviceBus?.maxAutoLockRenewalDuration ?? '00:05:00',
      'host.json extensions.serviceBus.maxAutoLockRenewalDuration',
    ),
    source,
  };
}

/**
 * Combinations that cannot work, whatever each value alone. An Agent runs until its step's
 * complete-by: its message lock must be renewed that long (or a second Agent gets the request
 * mid-call), the broker must still remember the request's MessageId (or a re-send is not absorbed),
 * and the host must not stop the invocation first.
 */
export function checkAgainstLimits(s: Settings, limits: HostLimits): void {
  const step = s.stepTimeoutSeconds;
  const name = settingNames.stepTimeoutSeconds;
  if (step > limits.maxAutoLockRenewalSeconds) {
    throw new SettingsError(
      name,
      `${step} s exceeds the message lock renewal limit of ${limits.maxAutoLockRenewalSeconds} s ` +
        `(extensions.serviceBus.maxAutoLockRenewalDuration in ${limits.source}): an Agent still working ` +
        'would lose its message to a second Agent',
    );
  }
  if (step > duplicateDetectionWindowSeconds) {
    throw new SettingsError(
      name,
      `${step} s exceeds the Service Bus duplicate-detection window of ${duplicateDetectionWindowSeconds} s ` +
        '(DuplicateDetectionHistoryTimeWindow): a re-sent request would no longer be absorbed',
    );
  }
  if (step >= limits.functionTimeoutSeconds) {
    throw new SettingsError(
      name,
      `${step} s is not below functionTimeout (${limits.functionTimeoutSeconds} s in ${limits.source}): ` +
        'the host would stop an Agent before its complete-by',
    );
  }
}

/**
 * Parses settings from an environment and checks them against each other and host.json; throws
 * SettingsError naming the first bad setting (and the limit it breaks).
 */
export function loadSettings(env: Env = process.env, limits?: HostLimits): Settings {
  const soft = integer(env, settingNames.failureSoftThreshold, 3, 1, 100);
  const hard = integer(env, settingNames.failureHardThreshold, 5, 1, 100);
  if (hard < soft) {
    throw new SettingsError(
      settingNames.failureHardThreshold,
      `must be at least ${settingNames.failureSoftThreshold} (${soft}), got ${hard}`,
    );
  }
  const stepTimeoutSeconds = integer(env, settingNames.stepTimeoutSeconds, 60, 1, 3600);
  const store = stateStore(env);
  const loaded: Settings = {
    serviceBus: serviceBus(env),
    stateStore: store,
    stateStoreAccounts: stateStoreAccounts(env, store),
    remoteServices: Object.fromEntries(
      orderWorkflow.steps.map((s) => [s.agent, url(env, serviceUrlSetting(s.agent))]),
    ) as Record<OrderAgentName, string>,
    supervisorSchedule: schedule(env, settingNames.supervisorSchedule),
    stepTimeoutSeconds,
    claimTimeoutSeconds: integer(
      env,
      settingNames.claimTimeoutSeconds,
      Math.max(60, stepTimeoutSeconds),
      1,
      3600,
    ),
    failureSoftThreshold: soft,
    failureHardThreshold: hard,
    extendedBackoffSeconds: integer(env, settingNames.extendedBackoffSeconds, 120, 0, 86_400),
    statusEvents: oneOf(env, settingNames.statusEvents, statusEventLevels, defaultStatusEventLevel),
    serviceOutageAlertThreshold: integer(env, settingNames.serviceOutageAlertThreshold, 5, 1, 1000),
    admissionBacklogLimitSeconds: 0,
    operatorBulkRatePerSecond: integer(env, settingNames.operatorBulkRatePerSecond, 20, 1, 1000),
    customerIntakePerSecond: integer(env, settingNames.customerIntakePerSecond, 0, 0, 10_000),
    customerIntakeMaxWaitSeconds: 0,
    customerSubmissionsAtOnce: integer(env, settingNames.customerSubmissionsAtOnce, 8, 0, 1000),
    orderIndexPartitions: integer(
      env,
      settingNames.orderIndexPartitions,
      defaultIndexPartitions,
      1,
      maxIndexPartitions,
    ),
    retention: retentionSettings(env, stateStore(env), { integer, oneOf, read }),
  };
  loaded.admissionBacklogLimitSeconds = integer(
    env,
    settingNames.admissionBacklogLimitSeconds,
    hard * loaded.claimTimeoutSeconds,
    0,
    86_400,
  );
  loaded.customerIntakeMaxWaitSeconds = integer(
    env,
    settingNames.customerIntakeMaxWaitSeconds,
    loaded.admissionBacklogLimitSeconds > 0 ? loaded.admissionBacklogLimitSeconds : 3600,
    0,
    86_400,
  );
  const host = limits ?? readHostLimits(env);
  checkAgainstLimits(loaded, host);
  return { ...loaded, functionTimeoutSeconds: host.functionTimeoutSeconds };
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
