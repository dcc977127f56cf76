import { defaultRetention, type RetentionPolicy } from '../domain/retention.js';
import { connectionStringParts } from './connectionStrings.js';
import { SettingsError, settingNames, type StateStoreConnection } from './settings.js';

type Env = Record<string, string | undefined>;

/** Where the archive blobs go: the state store's account, its blob service. */
export type ArchiveConnection =
  { kind: 'connectionString'; connectionString: string } | { kind: 'identity'; blobServiceUri: string };

export interface RetentionSettings extends RetentionPolicy {
  /** Absent when nothing is archived (ORDER_ARCHIVE=off or ORDER_RETENTION_DAYS=0). */
  archiveConnection?: ArchiveConnection;
}

/** The readers settings.ts validates every setting with, so the messages read the same. */
interface Readers {
  integer(env: Env, name: string, fallback: number, min: number, max: number): number;
  oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T;
  read(env: Env, name: string): string | undefined;
}

/**
 * The blob service of the state store's account: a connection string with a BlobEndpoint, an
 * account key or development storage; in Azure the table URI's account (`.table.` -> `.blob.`)
 * unless OrderArchiveConnection__blobServiceUri names one. Undefined when neither says.
 */
function archiveConnection(env: Env, store: StateStoreConnection, r: Readers): ArchiveConnection | undefined {
  const explicit = r.read(env, settingNames.orderArchiveBlobUri);
  if (explicit !== undefined) {
    if (!/^https?:\/\/[^/]+/i.test(explicit)) {
      throw new SettingsError(settingNames.orderArchiveBlobUri, `is not an http(s) URL: ${explicit}`);
    }
    return { kind: 'identity', blobServiceUri: explicit.replace(/\/+$/, '') };
  }
  if (store.kind === 'connectionString') {
    const parts = connectionStringParts(store.connectionString);
    if (typeof parts === 'string') return undefined;
    const dev = /^true$/i.test(parts.get('usedevelopmentstorage') ?? '');
    // An account key derives the blob endpoint only when no service endpoint is spelled out
    // (then the SDK builds it from the account name and EndpointSuffix).
    const explicitEndpoints = ['tableendpoint', 'queueendpoint', 'fileendpoint'].some((k) => parts.get(k));
    const keyed =
      parts.get('accountname') &&
      parts.get('accountkey') &&
      parts.get('defaultendpointsprotocol') &&
      !explicitEndpoints;
    if (dev || parts.get('blobendpoint') || keyed) {
      return { kind: 'connectionString', connectionString: store.connectionString };
    }
    // A SAS for the account's table endpoint: the same account's blob endpoint, the same SAS.
    const table = parts.get('tableendpoint');
    const sas = parts.get('sharedaccesssignature');
    if (table && sas && /\.table\.core\./i.test(table)) {
      const blob = table.replace(/\.table\.core\./i, '.blob.core.');
      return {
        kind: 'connectionString',
        connectionString: `BlobEndpoint=${blob};SharedAccessSignature=${sas}`,
      };
    }
    return undefined;
  }
  const uri = store.tableServiceUri;
  if (/\.table\.core\./i.test(uri)) {
    return {
      kind: 'identity',
      blobServiceUri: uri.replace(/\.table\.core\./i, '.blob.core.').replace(/\/+$/, ''),
    };
  }
  return undefined;
}

/** ORDER_RETENTION_DAYS, IDEMPOTENCY_RETENTION_DAYS, ORDER_PURGE_RATE_PER_SECOND, ORDER_ARCHIVE. */
export function retentionSettings(env: Env, store: StateStoreConnection, r: Readers): RetentionSettings {
  const policy: RetentionPolicy = {
    orderRetentionDays: r.integer(
      env,
      settingNames.orderRetentionDays,
      defaultRetention.orderRetentionDays,
      0,
      36_500,
    ),
    idempotencyRetentionDays: r.integer(
      env,
      settingNames.idempotencyRetentionDays,
      defaultRetention.idempotencyRetentionDays,
      0,
      36_500,
    ),
    purgeRatePerSecond: r.integer(
      env,
      settingNames.orderPurgeRatePerSecond,
      defaultRetention.purgeRatePerSecond,
      1,
      1000,
    ),
    archive: r.oneOf(env, settingNames.orderArchive, ['on', 'off'] as const, 'on') === 'on',
  };
  if (!policy.archive || policy.orderRetentionDays === 0) return policy;
  const connection = archiveConnection(env, store, r);
  if (!connection) {
    throw new SettingsError(
      settingNames.orderArchiveBlobUri,
      `is missing: ${settingNames.orderArchive}=on needs a blob service to archive to, and ` +
        `${settingNames.stateStore} names none (set this, or ${settingNames.orderArchive}=off)`,
    );
  }
  return { ...policy, archiveConnection: connection };
}
