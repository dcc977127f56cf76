import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export type AppSettings = Record<string, string>;

/**
 * `local.settings.json` `Values`, as `func start` reads them: variables already set in the
 * environment win over the file.
 */
export function readLocalSettings(appRoot: string, environment: NodeJS.ProcessEnv): AppSettings {
  const file = join(appRoot, 'local.settings.json');
  if (!existsSync(file)) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`${file} is not valid JSON: ${(err as Error).message}`);
  }
  const values = (parsed as { Values?: unknown }).Values;
  if (values === undefined) return {};
  if (typeof values !== 'object' || values === null) throw new Error(`${file}: "Values" must be an object.`);
  const result: AppSettings = {};
  for (const [name, value] of Object.entries(values)) {
    if (environment[name] !== undefined) continue;
    result[name] = String(value);
  }
  return result;
}

/** Puts the app settings into process.env, where the app's code and the SDKs read them. */
export function applySettings(settings: AppSettings): void {
  for (const [name, value] of Object.entries(settings)) process.env[name] = value;
}

/**
 * Resolves `%SETTING%` in a binding property, like the host's name resolver; an unknown setting
 * is an indexing error in Azure, so it is one here.
 */
export function resolveSettingExpressions(value: string, functionName: string, property: string): string {
  return value.replace(/%([^%]+)%/g, (_whole, name: string) => {
    const resolved = process.env[name];
    if (resolved === undefined || resolved === '') {
      throw new Error(
        `Function "${functionName}": ${property} refers to app setting "${name}", which is not set.`,
      );
    }
    return resolved;
  });
}

/** host.json, the parts the local host honours. */
export interface HostJson {
  routePrefix: string;
  serviceBus: {
    maxConcurrentCalls: number;
    autoCompleteMessages: boolean;
    maxAutoLockRenewalDurationMs: number;
    prefetchCount: number;
    /** Most messages handed to one call of a batch (`cardinality: 'many'`) trigger. */
    maxMessageBatchSize: number;
  };
  /** `maxRequestBodySize` is not a host.json setting in Azure; it is the fixed 100 MB limit. */
}

export function readHostJson(appRoot: string): HostJson {
  const file = join(appRoot, 'host.json');
  let raw: Record<string, unknown> = {};
  if (existsSync(file)) {
    try {
      raw = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    } catch (err) {
      throw new Error(`${file} is not valid JSON: ${(err as Error).message}`);
    }
  }
  const extensions = (raw.extensions ?? {}) as Record<string, Record<string, unknown> | undefined>;
  const http = extensions.http ?? {};
  const sb = extensions.serviceBus ?? {};
  const routePrefix =
    typeof http.routePrefix === 'string' ? http.routePrefix.replace(/^\/+|\/+$/g, '') : 'api';
  return {
    routePrefix,
    serviceBus: {
      maxConcurrentCalls: positiveInteger(
        sb.maxConcurrentCalls,
        16,
        'extensions.serviceBus.maxConcurrentCalls',
      ),
      autoCompleteMessages: sb.autoCompleteMessages === undefined ? true : sb.autoCompleteMessages === true,
      maxAutoLockRenewalDurationMs:
        sb.maxAutoLockRenewalDuration === undefined
          ? 5 * 60_000
          : parseTimeSpan(
              String(sb.maxAutoLockRenewalDuration),
              'extensions.serviceBus.maxAutoLockRenewalDuration',
            ),
      prefetchCount:
        sb.prefetchCount === undefined ? 0 : positiveInteger(sb.prefetchCount, 0, 'prefetchCount', true),
      // Azure's documented default.
      maxMessageBatchSize: positiveInteger(
        sb.maxMessageBatchSize,
        1000,
        'extensions.serviceBus.maxMessageBatchSize',
      ),
    },
  };
}

function positiveInteger(value: unknown, fallback: number, name: string, allowZero = false): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < (allowZero ? 0 : 1))
    throw new Error(`host.json ${name} must be a positive integer.`);
  return n;
}

/** .NET TimeSpan text `[d.]hh:mm:ss[.fffffff]` to milliseconds. */
export function parseTimeSpan(text: string, name: string): number {
  const match = /^(?:(\d+)\.)?(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,7}))?$/.exec(text.trim());
  if (!match) throw new Error(`${name}: "${text}" is not a TimeSpan (hh:mm:ss).`);
  const [, days, hours, minutes, seconds, fraction] = match;
  const fractionMs = fraction ? Number(`0.${fraction}`) * 1000 : 0;
  return (
    ((Number(days ?? 0) * 24 + Number(hours)) * 60 + Number(minutes)) * 60_000 +
    Number(seconds) * 1000 +
    fractionMs
  );
}
