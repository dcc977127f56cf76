/**
 * local.settings.sample.json names every setting the app reads, found by reading the app's source
 * (functions/ and shared/): the name tables the config and telemetry modules read through, and
 * every literal `env.X`, `env['X']` or `read(env, 'X')`. A read the scan cannot name (a computed
 * `env[...]`) fails the test unless it goes through one of those tables.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { settingNames } from '../../shared/config/settings.js';
import { telemetrySettingNames } from '../../shared/observability/telemetry.js';

// Compiled to dist/test/infra; the sources live at the repository root.
const root = resolve(__dirname, '..', '..', '..');

/** Set by App Service or the Functions host, never by whoever configures the app. */
const platformSet = new Set([
  'WEBSITE_AUTH_ENABLED',
  'WEBSITE_HOSTNAME',
  'WEBSITE_SITE_NAME',
  'AzureWebJobsScriptRoot',
]);
/** Read by the Functions host (not our code), and set in the sample for `func start`. */
const hostReads = new Set([
  'FUNCTIONS_WORKER_RUNTIME',
  'AzureWebJobsStorage',
  'FUNCTIONS_REQUEST_BODY_SIZE_LIMIT',
]);
/** The computed reads allowed: through the name tables above (settings.ts reads `env[name]`). */
const tableReads = [/^env\[name\]$/, /^env\[telemetrySettingNames\.\w+\]$/];

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) sourceFiles(full, out);
    else if (name.endsWith('.ts')) out.push(full);
  }
  return out;
}

interface Scan {
  names: Set<string>;
  unnamed: string[];
}

function scan(files: { path: string; text: string }[]): Scan {
  const names = new Set<string>([...Object.values(settingNames), ...Object.values(telemetrySettingNames)]);
  const unnamed: string[] = [];
  for (const { path, text } of files) {
    for (const m of text.matchAll(/\benv\??\.([A-Za-z_]\w*)/g)) names.add(m[1]!);
    for (const m of text.matchAll(/\bread\(env, '([^']+)'\)/g)) names.add(m[1]!);
    for (const m of text.matchAll(/\benv\[([^\]]+)\]/g)) {
      const literal = /^'([^']+)'$|^"([^"]+)"$/.exec(m[1]!.trim());
      if (literal) names.add(literal[1] ?? literal[2]!);
      else if (!tableReads.some((re) => re.test(m[0]))) unnamed.push(`${path}: ${m[0]}`);
    }
  }
  return { names, unnamed };
}

interface Sample {
  Values: Record<string, string>;
  _inAzure?: Record<string, string>;
}

function problems(read: Scan, sample: Sample): string[] {
  const listed = new Set([...Object.keys(sample.Values), ...Object.keys(sample._inAzure ?? {})]);
  const out = read.unnamed.map((u) => `a setting read the scan cannot name: ${u}`);
  for (const name of [...read.names].sort()) {
    if (platformSet.has(name)) continue;
    if (!listed.has(name)) out.push(`${name} is read by the app but missing from local.settings.sample.json`);
  }
  for (const name of Object.keys(sample.Values)) {
    if (!read.names.has(name) && !hostReads.has(name))
      out.push(`${name} is in local.settings.sample.json Values but nothing reads it`);
  }
  return out;
}

const files = ['functions', 'shared'].flatMap((dir) =>
  sourceFiles(join(root, dir)).map((full) => ({
    path: relative(root, full),
    text: readFileSync(full, 'utf8'),
  })),
);
const sample = JSON.parse(readFileSync(join(root, 'local.settings.sample.json'), 'utf8')) as Sample;

test('local.settings.sample.json lists every setting the app reads, and nothing it does not', () => {
  const read = scan(files);
  for (const name of ['SUPERVISOR_SCHEDULE', 'APPLICATIONINSIGHTS_CONNECTION_STRING', 'WEBSITE_AUTH_ENABLED'])
    assert.ok(read.names.has(name), `the scan finds ${name}`);
  assert.deepEqual(problems(read, sample), []);
});

test('the check fails on a new setting, a computed read, and a sample entry nobody reads', () => {
  const extra = { path: 'shared/x.ts', text: "const a = env.NEW_SETTING; const b = read(env, 'OTHER');" };
  assert.deepEqual(problems(scan([...files, extra]), sample), [
    'NEW_SETTING is read by the app but missing from local.settings.sample.json',
    'OTHER is read by the app but missing from local.settings.sample.json',
  ]);
  const computed = { path: 'shared/y.ts', text: 'const c = process.env[`X_${n}`];' };
  assert.match(problems(scan([...files, computed]), sample).join(), /cannot name: shared\/y\.ts/);
  const stale = { ...sample, Values: { ...sample.Values, OLD_SETTING: '1' } };
  assert.deepEqual(problems(scan(files), stale), [
    'OLD_SETTING is in local.settings.sample.json Values but nothing reads it',
  ]);
});
