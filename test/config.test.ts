import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadSettings, SettingsError } from '../shared/config/settings.js';

const base = {
  ServiceBusConnection:
    'Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;',
  StateStoreConnection: 'UseDevelopmentStorage=true',
  INVENTORY_SERVICE_URL: 'http://127.0.0.1:1/',
  PAYMENT_SERVICE_URL: 'http://127.0.0.1:2',
  SHIPPING_SERVICE_URL: 'http://127.0.0.1:3',
};

test('loads connection strings and applies defaults', () => {
  const s = loadSettings(base);
  assert.equal(s.serviceBus.kind, 'connectionString');
  assert.equal(s.stateStore.kind, 'connectionString');
  assert.equal(s.remoteServices.inventory, 'http://127.0.0.1:1');
  assert.equal(s.stepTimeoutSeconds, 60);
  assert.equal(s.failureSoftThreshold, 3);
  assert.equal(s.failureHardThreshold, 5);
  assert.equal(s.supervisorSchedule, '*/30 * * * * *');
});

test('identity-based settings are accepted in place of connection strings', () => {
  const s = loadSettings({
    ...base,
    ServiceBusConnection: undefined,
    StateStoreConnection: undefined,
    ServiceBusConnection__fullyQualifiedNamespace: 'ns.servicebus.windows.net',
    StateStoreConnection__tableServiceUri: 'https://acct.table.core.windows.net',
  });
  assert.deepEqual(s.serviceBus, { kind: 'identity', fullyQualifiedNamespace: 'ns.servicebus.windows.net' });
  assert.deepEqual(s.stateStore, {
    kind: 'identity',
    tableServiceUri: 'https://acct.table.core.windows.net',
  });
});

test('a missing setting fails with its name', () => {
  assert.throws(
    () => loadSettings({ ...base, PAYMENT_SERVICE_URL: undefined }),
    (e: unknown) => e instanceof SettingsError && e.setting === 'PAYMENT_SERVICE_URL',
  );
  assert.throws(
    () => loadSettings({ ...base, ServiceBusConnection: '' }),
    (e: unknown) => e instanceof SettingsError && e.setting === 'ServiceBusConnection',
  );
});

test('malformed numbers and URLs fail with the setting name', () => {
  assert.throws(() => loadSettings({ ...base, STEP_TIMEOUT_SECONDS: 'soon' }), /STEP_TIMEOUT_SECONDS/);
  assert.throws(() => loadSettings({ ...base, SHIPPING_SERVICE_URL: 'ftp://x' }), /SHIPPING_SERVICE_URL/);
  assert.throws(
    () => loadSettings({ ...base, FAILURE_SOFT_THRESHOLD: '6', FAILURE_HARD_THRESHOLD: '5' }),
    /FAILURE_HARD_THRESHOLD/,
  );
});

test('STATUS_EVENTS: process level by default, step level on request, anything else names the setting', () => {
  assert.equal(loadSettings(base).statusEvents, 'process');
  assert.equal(loadSettings({ ...base, STATUS_EVENTS: 'step' }).statusEvents, 'step');
  assert.equal(loadSettings({ ...base, STATUS_EVENTS: ' process ' }).statusEvents, 'process');
  assert.throws(
    () => loadSettings({ ...base, STATUS_EVENTS: 'steps' }),
    (e: unknown) =>
      e instanceof SettingsError &&
      e.setting === 'STATUS_EVENTS' &&
      /must be one of process, step, got "steps"/.test(e.message),
  );
});
