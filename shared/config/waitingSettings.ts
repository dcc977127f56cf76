import { SettingsError } from './settings.js';
import type { SigningKey } from '../callbacks/token.js';

/**
 * Settings of waiting steps (issue 25), read and validated at start-up like the others. In Azure
 * CALLBACK_SIGNING_KEYS is an app setting by Key Vault reference (`@Microsoft.KeyVault(...)`);
 * rotation: put the new key first, keep the old one second until every token it signed has
 * expired (the longest wait plus CALLBACK_GRACE_SECONDS), then drop it.
 */
export const waitingSettingNames = {
  signingKeys: 'CALLBACK_SIGNING_KEYS',
  baseUrl: 'CALLBACK_BASE_URL',
  graceSeconds: 'CALLBACK_GRACE_SECONDS',
  newOrderVersion: 'NEW_ORDER_WORKFLOW_VERSION',
} as const;

export interface WaitingSettings {
  /** First signs; all verify. Empty when no callback step is in use. */
  signingKeys: SigningKey[];
  /** Where services send callbacks (the app's public base, without /api); undefined: from WEBSITE_HOSTNAME. */
  baseUrl?: string;
  graceSeconds: number;
  /** The workflow version new orders start on; undefined: the latest held. */
  newOrderVersion?: number;
}

type Env = Record<string, string | undefined>;

/** `id:secret[,id:secret]`, secrets base64 or base64url, at least 32 bytes each, one or two keys. */
export function parseSigningKeys(raw: string): SigningKey[] {
  const name = waitingSettingNames.signingKeys;
  const entries = raw
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  if (entries.length < 1 || entries.length > 2) {
    throw new SettingsError(
      name,
      `must list one or two keys as id:secret, comma-separated; got ${entries.length}`,
    );
  }
  const keys = entries.map((entry) => {
    const at = entry.indexOf(':');
    const id = at > 0 ? entry.slice(0, at) : '';
    if (!/^[A-Za-z0-9_-]{1,32}$/.test(id))
      throw new SettingsError(name, 'each key needs an id (letters, digits, - or _) before ":"');
    const secret = Buffer.from(entry.slice(at + 1), 'base64');
    if (secret.length < 32) throw new SettingsError(name, `key ${id} is shorter than 32 bytes (base64)`);
    return { id, secret };
  });
  if (keys.length === 2 && keys[0].id === keys[1].id)
    throw new SettingsError(name, 'the two keys need different ids');
  return keys;
}

export function loadWaitingSettings(env: Env = process.env, callbackStepsInUse = false): WaitingSettings {
  const rawKeys = env.CALLBACK_SIGNING_KEYS?.trim();
  if (!rawKeys && callbackStepsInUse) {
    throw new SettingsError(
      waitingSettingNames.signingKeys,
      'is required: new orders start on a workflow version with callback steps',
    );
  }
  const baseUrl = env.CALLBACK_BASE_URL?.trim();
  if (baseUrl) {
    let url: URL;
    try {
      url = new URL(baseUrl);
    } catch {
      throw new SettingsError(waitingSettingNames.baseUrl, `is not a URL: "${baseUrl}"`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw new SettingsError(waitingSettingNames.baseUrl, 'must be an http(s) URL');
    }
  }
  const graceRaw = env.CALLBACK_GRACE_SECONDS?.trim();
  const graceSeconds = graceRaw ? Number(graceRaw) : 300;
  if (!Number.isInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > 86_400) {
    throw new SettingsError(
      waitingSettingNames.graceSeconds,
      `must be an integer from 0 to 86400, got "${graceRaw}"`,
    );
  }
  const versionRaw = env.NEW_ORDER_WORKFLOW_VERSION?.trim();
  const newOrderVersion = versionRaw ? Number(versionRaw) : undefined;
  if (newOrderVersion !== undefined && (!Number.isInteger(newOrderVersion) || newOrderVersion < 1)) {
    throw new SettingsError(
      waitingSettingNames.newOrderVersion,
      `must be a workflow version (1, 2, ...), got "${versionRaw}"`,
    );
  }
  return {
    signingKeys: rawKeys ? parseSigningKeys(rawKeys) : [],
    ...(baseUrl ? { baseUrl: baseUrl.replace(/\/+$/, '') } : {}),
    graceSeconds,
    ...(newOrderVersion !== undefined ? { newOrderVersion } : {}),
  };
}

/** The callback base: the setting, else this app's own host name (Azure and the local host set it). */
export function callbackBase(s: WaitingSettings, env: Env = process.env): string {
  if (s.baseUrl) return s.baseUrl;
  const host = env.WEBSITE_HOSTNAME?.trim();
  if (!host)
    throw new SettingsError(waitingSettingNames.baseUrl, 'is needed: WEBSITE_HOSTNAME is not set either');
  const local = /^(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$/.test(host);
  return `${local ? 'http' : 'https'}://${host}`;
}

let cached: WaitingSettings | undefined;

/**
 * The process-wide waiting settings. `startsWithCallbacks`: whether new orders start on a version
 * with callback steps (then CALLBACK_SIGNING_KEYS is required).
 */
export function waitingSettings(startsWithCallbacks = false): WaitingSettings {
  cached ??= loadWaitingSettings(process.env, startsWithCallbacks);
  return cached;
}

export function resetWaitingSettingsCache(): void {
  cached = undefined;
}
