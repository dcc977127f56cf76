import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { defaultPorts } from '../../local/stack.js';
import {
  parseStartArgs,
  stableCallbackSigningKeys,
  stableFunctionKey,
  UsageError,
} from '../../local/startOptions.js';
import { formatStackLine } from '../../local/logFormat.js';

const scratch = mkdtempSync(join(tmpdir(), 'e2e-opts-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

test('defaults: standard ports, .data, compact logs, no setting overrides', () => {
  const o = parseStartArgs([], {}, '/repo');
  assert.deepEqual(o?.ports, defaultPorts);
  assert.equal(o?.dataDir, '/repo/.data');
  assert.equal(o?.inMemory, false);
  assert.equal(o?.logMode, 'compact');
  assert.deepEqual(o?.settings, {});
});

test('flags beat environment variables; settings come from the environment', () => {
  const o = parseStartArgs(
    ['--http-port', '8080', '--table-port=0', '--in-memory', '--verbose', '--data-dir', 'x'],
    { LOCAL_HTTP_PORT: '9090', LOCAL_PAYMENT_PORT: '7202', STEP_TIMEOUT_SECONDS: '7' },
    '/repo',
  );
  assert.equal(o?.ports.http, 8080);
  assert.equal(o?.ports.table, 0);
  assert.equal(o?.ports.payment, 7202);
  assert.equal(o?.dataDir, '/repo/x');
  assert.equal(o?.inMemory, true);
  assert.equal(o?.logMode, 'verbose');
  assert.deepEqual(o?.settings, { STEP_TIMEOUT_SECONDS: '7' });
  assert.equal(parseStartArgs(['--help'], {}), undefined);
});

test('bad input is a UsageError naming the flag, variable or setting', () => {
  assert.throws(() => parseStartArgs(['--http-port', '70000'], {}), /--http-port must be a port number/);
  assert.throws(() => parseStartArgs(['--blob-port'], {}), /--blob-port needs a value/);
  assert.throws(() => parseStartArgs([], { LOCAL_SERVICEBUS_PORT: '-1' }), /LOCAL_SERVICEBUS_PORT/);
  assert.throws(() => parseStartArgs(['--nope'], {}), UsageError);
  assert.throws(() => parseStartArgs([], { STEP_TIMEOUT_SECONDS: 'soon' }), /STEP_TIMEOUT_SECONDS/);
  assert.throws(
    () => parseStartArgs([], { FAILURE_SOFT_THRESHOLD: '4', FAILURE_HARD_THRESHOLD: '2' }),
    /FAILURE_HARD_THRESHOLD/,
  );
});

test('the function key is generated once and kept; FUNCTIONS_LOCAL_KEY wins; a garbled file is replaced', () => {
  const dir = join(scratch, 'data');
  const first = stableFunctionKey(dir, {});
  assert.match(first.key, /^[A-Za-z0-9_-]{32}$/);
  assert.equal(stableFunctionKey(dir, {}).key, first.key);
  assert.equal(readFileSync(join(dir, 'function-key'), 'utf8').trim(), first.key);
  assert.equal(stableFunctionKey(dir, { FUNCTIONS_LOCAL_KEY: 'from-env' }).key, 'from-env');
  writeFileSync(join(dir, 'function-key'), 'not a key!\n');
  const replaced = stableFunctionKey(dir, {});
  assert.notEqual(replaced.key, first.key);
  assert.match(replaced.key, /^[A-Za-z0-9_-]{32}$/);
});

test('the callback signing key is made once and kept; CALLBACK_SIGNING_KEYS wins; a garbled file is replaced', () => {
  const dir = join(scratch, 'signing');
  const first = stableCallbackSigningKeys(dir, {});
  assert.match(first.keys, /^local:[A-Za-z0-9+/]{43}=$/);
  assert.match(first.source, /\(new\)$/);
  assert.equal(stableCallbackSigningKeys(dir, {}).keys, first.keys);
  assert.equal(readFileSync(join(dir, 'callback-signing-key'), 'utf8').trim(), first.keys);
  assert.equal(stableCallbackSigningKeys(dir, { CALLBACK_SIGNING_KEYS: 'k2:abc' }).keys, 'k2:abc');
  writeFileSync(join(dir, 'callback-signing-key'), 'short:AAAA\n');
  const replaced = stableCallbackSigningKeys(dir, {});
  assert.notEqual(replaced.keys, 'short:AAAA');
  assert.match(replaced.keys, /^local:/);
});

test('compact logs: function messages with their fields, no Executing/Executed, problems marked', () => {
  const line = (level: string, msg: string) =>
    `[host] 2030-01-01T10:00:00.123Z [${level}] scheduler (abc-123): ${msg}`;
  assert.equal(
    formatStackLine(
      line(
        'Information',
        '{"msg":"claimed","actor":"scheduler","orderId":"cdcc6b4c-7d3a-458c","from":"Pending"}',
      ),
      'compact',
    ),
    '10:00:00.123 scheduler      claimed order=cdcc6b4c from=Pending',
  );
  assert.equal(
    formatStackLine(line('Information', "Executing 'Functions.scheduler' (...)"), 'compact'),
    undefined,
  );
  assert.equal(formatStackLine(line('Information', 'x'), 'quiet'), undefined);
  assert.match(formatStackLine(line('Error', 'boom'), 'quiet') ?? '', /ERROR scheduler\s+boom/);
  assert.equal(formatStackLine('[servicebus] connection 1 opened', 'compact'), undefined);
  assert.equal(
    formatStackLine('[servicebus] connection 1 opened', 'verbose'),
    '[servicebus] connection 1 opened',
  );
});

test('--storage-accounts spreads orders over that many Azurite accounts, 1 by default', () => {
  assert.equal(parseStartArgs([], {})?.storageAccounts, 1);
  assert.equal(parseStartArgs(['--storage-accounts', '2'], {})?.storageAccounts, 2);
  assert.equal(parseStartArgs([], { LOCAL_STORAGE_ACCOUNTS: '3' })?.storageAccounts, 3);
  assert.throws(
    () => parseStartArgs(['--storage-accounts', '0'], {}),
    /--storage-accounts must be a number of accounts from 1 to 8/,
  );
});
