import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { ensureLocalSettings, findOnPath, funcMissingMessage } from '../../local/startFunc.js';
import { loadSettings, serviceUrlSetting } from '../../shared/config/settings.js';
import { remoteServiceNames, type RemoteServiceName } from '../../shared/agents/remoteOperations.js';

// `npm run start:func` cannot run here (no Core Tools on this machine); this covers what can:
// the message when func is missing, and the local.settings.json it writes.

const repoRoot = resolve(__dirname, '..', '..', '..');
const scratch = mkdtempSync(join(tmpdir(), 'e2e-func-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

test('without func on PATH: a message on how to install Core Tools or use npm start, exit 1', () => {
  const result = spawnSync(process.execPath, [join(repoRoot, 'dist', 'local', 'startFunc.js')], {
    env: { ...process.env, PATH: dirname(process.execPath) },
    encoding: 'utf8',
  });
  assert.equal(result.status, 1);
  assert.equal(result.stderr.trim(), funcMissingMessage);
  assert.match(result.stderr, /npm start/);
  assert.match(result.stderr, /azure-functions-core-tools@4/);
});

test('findOnPath finds an executable and ignores a non-executable file', () => {
  const bin = join(scratch, 'bin');
  spawnSync('mkdir', ['-p', bin]);
  writeFileSync(join(bin, 'func'), '#!/bin/sh\n', { mode: 0o755 });
  writeFileSync(join(bin, 'notfunc'), 'x', { mode: 0o644 });
  assert.equal(findOnPath('func', { PATH: `/nonexistent:${bin}` }), join(bin, 'func'));
  assert.equal(findOnPath('notfunc', { PATH: bin }), undefined);
});

const services = {
  // What Azurite with blob, queue and table hands out (startFunc starts all three).
  storageConnectionString:
    'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;',
  serviceBusConnectionString:
    'Endpoint=sb://127.0.0.1;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;',
  remote: Object.fromEntries(
    remoteServiceNames.map((name, i) => [name, { url: `http://127.0.0.1:${7101 + i}` }]),
  ) as Record<RemoteServiceName, { url: string }>,
};

test('local.settings.json is written from the sample with the real endpoints, and never overwritten', () => {
  const app = join(scratch, 'app');
  spawnSync('mkdir', ['-p', app]);
  copyFileSync(join(repoRoot, 'local.settings.sample.json'), join(app, 'local.settings.sample.json'));
  const first = ensureLocalSettings(app, services);
  assert.equal(first.written, true);
  const written = JSON.parse(readFileSync(first.path, 'utf8'));
  assert.equal(written.Values.FUNCTIONS_WORKER_RUNTIME, 'node');
  assert.equal(written.Values.AzureWebJobsStorage, services.storageConnectionString);
  assert.equal(written.Values.StateStoreConnection, services.storageConnectionString);
  assert.equal(written.Values.ServiceBusConnection, services.serviceBusConnectionString);
  // One URL setting per declared step's Agent, whatever the sample holds.
  for (const name of remoteServiceNames)
    assert.equal(written.Values[serviceUrlSetting(name)], services.remote[name].url, name);
  assert.equal(written.Values.PAYMENT_SERVICE_URL, services.remote.payment.url);
  assert.equal(written.Host.LocalHttpPort, 7071);
  assert.equal(written._inAzure, undefined, 'the Azure-only notes stay in the sample');
  // The app accepts what was written.
  const parsed = loadSettings(written.Values);
  assert.equal(parsed.remoteServices.shipping, services.remote.shipping.url);

  writeFileSync(first.path, '{"Values":{"mine":"1"}}');
  const second = ensureLocalSettings(app, {
    ...services,
    remote: { ...services.remote, payment: { url: 'http://127.0.0.1:1' } },
  });
  assert.equal(second.written, false);
  assert.equal(readFileSync(first.path, 'utf8'), '{"Values":{"mine":"1"}}');
});
