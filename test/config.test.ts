import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  loadSettings,
  readHostLimits,
  serviceUrlSetting,
  SettingsError,
  timeSpanSeconds,
} from '../shared/config/settings.js';
import { duplicateDetectionWindowSeconds } from '../shared/messaging/entities.js';
import { orderWorkflow } from '../shared/domain/index.js';

const base = {
  ServiceBusConnection:
    'Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;',
  StateStoreConnection: 'UseDevelopmentStorage=true',
  INVENTORY_SERVICE_URL: 'http://127.0.0.1:1/',
  PAYMENT_SERVICE_URL: 'http://127.0.0.1:2',
  SHIPPING_SERVICE_URL: 'http://127.0.0.1:3',
  // A step added to the workflow brings its own setting; the three above are asserted by name.
  ...Object.fromEntries(
    orderWorkflow.steps
      .filter((s) => !['inventory', 'payment', 'shipping'].includes(s.agent))
      .map((s, i) => [serviceUrlSetting(s.agent), `http://127.0.0.1:${10 + i}`]),
  ),
};

test("each declared step's service URL setting is required, named after its Agent", () => {
  assert.equal(serviceUrlSetting('payment'), 'PAYMENT_SERVICE_URL');
  assert.equal(serviceUrlSetting('fraud-check'), 'FRAUD_CHECK_SERVICE_URL');
  const loaded = loadSettings(base);
  for (const step of orderWorkflow.steps) {
    const name = serviceUrlSetting(step.agent);
    assert.ok(/^https?:/.test(loaded.remoteServices[step.agent]), name);
    assert.throws(
      () => loadSettings({ ...base, [name]: undefined }),
      (e: unknown) => e instanceof SettingsError && e.setting === name && /is missing/.test(e.message),
    );
    assert.throws(
      () => loadSettings({ ...base, [name]: 'not a url' }),
      new RegExp(`${name}: is not an http`),
    );
  }
});

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

test('STATUS_EVENTS: process level by default, step or none on request, anything else names the setting', () => {
  assert.equal(loadSettings(base).statusEvents, 'process');
  assert.equal(loadSettings({ ...base, STATUS_EVENTS: 'step' }).statusEvents, 'step');
  assert.equal(loadSettings({ ...base, STATUS_EVENTS: 'none' }).statusEvents, 'none');
  assert.equal(loadSettings({ ...base, STATUS_EVENTS: ' process ' }).statusEvents, 'process');
  for (const bad of ['steps', 'off']) {
    assert.throws(
      () => loadSettings({ ...base, STATUS_EVENTS: bad }),
      (e: unknown) =>
        e instanceof SettingsError &&
        e.setting === 'STATUS_EVENTS' &&
        new RegExp(`must be one of none, process, step, got "${bad}"`).test(e.message),
    );
  }
});

const limits = { functionTimeoutSeconds: 600, maxAutoLockRenewalSeconds: 300, source: 'host.json' };

test('CLAIM_TIMEOUT_SECONDS is its own setting, by default at least a minute', () => {
  assert.equal(loadSettings(base).claimTimeoutSeconds, 60);
  assert.equal(loadSettings({ ...base, STEP_TIMEOUT_SECONDS: '90' }).claimTimeoutSeconds, 90);
  assert.equal(loadSettings({ ...base, CLAIM_TIMEOUT_SECONDS: '7' }).claimTimeoutSeconds, 7);
  assert.throws(() => loadSettings({ ...base, CLAIM_TIMEOUT_SECONDS: '0' }), /CLAIM_TIMEOUT_SECONDS/);
});

test('a step timeout beyond the lock renewal or the duplicate-detection window fails naming both', () => {
  assert.equal(loadSettings({ ...base, STEP_TIMEOUT_SECONDS: '300' }, limits).stepTimeoutSeconds, 300);
  assert.throws(
    () => loadSettings({ ...base, STEP_TIMEOUT_SECONDS: '301' }, limits),
    (e: unknown) =>
      e instanceof SettingsError &&
      e.setting === 'STEP_TIMEOUT_SECONDS' &&
      /maxAutoLockRenewalDuration/.test(e.message) &&
      /300 s/.test(e.message),
  );
  assert.throws(
    () =>
      loadSettings({ ...base, STEP_TIMEOUT_SECONDS: '400' }, { ...limits, maxAutoLockRenewalSeconds: 900 }),
    /STEP_TIMEOUT_SECONDS: 400 s exceeds the Service Bus duplicate-detection window of 300 s/,
  );
});

test('a step timeout the host would cut off fails naming functionTimeout', () => {
  assert.throws(
    () => loadSettings({ ...base, STEP_TIMEOUT_SECONDS: '120' }, { ...limits, functionTimeoutSeconds: 120 }),
    /STEP_TIMEOUT_SECONDS: 120 s is not below functionTimeout \(120 s/,
  );
});

test("the limits are read from this repo's host.json, not assumed", () => {
  const real = readHostLimits({});
  const host = JSON.parse(readFileSync(join(real.source), 'utf8')) as {
    functionTimeout: string;
    extensions: { serviceBus: { maxAutoLockRenewalDuration: string } };
  };
  assert.equal(real.functionTimeoutSeconds, timeSpanSeconds(host.functionTimeout, 'x'));
  assert.equal(
    real.maxAutoLockRenewalSeconds,
    timeSpanSeconds(host.extensions.serviceBus.maxAutoLockRenewalDuration, 'x'),
  );
  // With the repo's host.json (lock renewal 5 min) 3600 s, accepted before, is refused now.
  assert.throws(() => loadSettings({ ...base, STEP_TIMEOUT_SECONDS: '3600' }), /maxAutoLockRenewalDuration/);
});

test('host.json TimeSpans parse, and a script root without host.json fails naming it', () => {
  assert.equal(timeSpanSeconds('00:10:00', 'x'), 600);
  assert.equal(timeSpanSeconds('1.00:00:30.5', 'x'), 86_430.5);
  assert.equal(timeSpanSeconds('-1', 'x'), Infinity);
  assert.throws(() => timeSpanSeconds('10m', 'host.json functionTimeout'), /host.json functionTimeout/);
  const empty = mkdtempSync(join(tmpdir(), 'no-host-'));
  try {
    assert.throws(() => readHostLimits({ AzureWebJobsScriptRoot: empty }), /host.json: cannot be read/);
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

test('the duplicate-detection window the check uses is the one every entity is configured with', () => {
  const config = JSON.parse(
    readFileSync(join(__dirname, '..', '..', 'infra', 'servicebus-emulator', 'Config.json'), 'utf8'),
  ) as { UserConfig: { Namespaces: Array<{ Queues: Array<{ Properties: Record<string, unknown> }> }> } };
  const windows = config.UserConfig.Namespaces.flatMap((ns) =>
    ns.Queues.map((q) => q.Properties.DuplicateDetectionHistoryTimeWindow),
  );
  assert.ok(windows.length > 0);
  for (const w of windows) assert.equal(w, `PT${duplicateDetectionWindowSeconds / 60}M`);
});

test('ADMISSION_BACKLOG_LIMIT_SECONDS: the door, by default hard threshold x claim timeout, 0 keeps it open', () => {
  assert.equal(loadSettings(base).admissionBacklogLimitSeconds, 5 * 60);
  assert.equal(
    loadSettings({ ...base, FAILURE_HARD_THRESHOLD: '4', CLAIM_TIMEOUT_SECONDS: '3' })
      .admissionBacklogLimitSeconds,
    12,
  );
  assert.equal(
    loadSettings({ ...base, ADMISSION_BACKLOG_LIMIT_SECONDS: '0' }).admissionBacklogLimitSeconds,
    0,
  );
  assert.throws(
    () => loadSettings({ ...base, ADMISSION_BACKLOG_LIMIT_SECONDS: '-1' }),
    /ADMISSION_BACKLOG_LIMIT_SECONDS/,
  );
});

test('CUSTOMER_SUBMISSIONS_AT_ONCE: 8 by default, 0 (off) to 1000, anything else names the setting', () => {
  assert.equal(loadSettings(base).customerSubmissionsAtOnce, 8);
  assert.equal(loadSettings({ ...base, CUSTOMER_SUBMISSIONS_AT_ONCE: '0' }).customerSubmissionsAtOnce, 0);
  for (const bad of ['-1', '1001', '1.5', 'many']) {
    assert.throws(
      () => loadSettings({ ...base, CUSTOMER_SUBMISSIONS_AT_ONCE: bad }),
      (e: unknown) => e instanceof SettingsError && e.setting === 'CUSTOMER_SUBMISSIONS_AT_ONCE',
      bad,
    );
  }
});

test('CUSTOMER_INTAKE_PER_SECOND: off (0) by default, 0 to 10000, anything else names the setting', () => {
  assert.equal(loadSettings(base).customerIntakePerSecond, 0);
  assert.equal(loadSettings({ ...base, CUSTOMER_INTAKE_PER_SECOND: '5' }).customerIntakePerSecond, 5);
  for (const bad of ['-1', '10001', '2.5', 'fast']) {
    assert.throws(
      () => loadSettings({ ...base, CUSTOMER_INTAKE_PER_SECOND: bad }),
      (e: unknown) => e instanceof SettingsError && e.setting === 'CUSTOMER_INTAKE_PER_SECOND',
      bad,
    );
  }
  // The longest wait for a turn: the door's limit by default, an hour with the door off.
  assert.equal(loadSettings(base).customerIntakeMaxWaitSeconds, 5 * 60);
  assert.equal(
    loadSettings({ ...base, ADMISSION_BACKLOG_LIMIT_SECONDS: '0' }).customerIntakeMaxWaitSeconds,
    3600,
  );
  assert.equal(
    loadSettings({ ...base, CUSTOMER_INTAKE_MAX_WAIT_SECONDS: '0' }).customerIntakeMaxWaitSeconds,
    0,
  );
  assert.throws(
    () => loadSettings({ ...base, CUSTOMER_INTAKE_MAX_WAIT_SECONDS: '-5' }),
    (e: unknown) => e instanceof SettingsError && e.setting === 'CUSTOMER_INTAKE_MAX_WAIT_SECONDS',
  );
});

test('ORDER_INDEX_PARTITIONS: 32 partitions per state by default, 1 to 256, anything else names the setting', () => {
  assert.equal(loadSettings(base).orderIndexPartitions, 32);
  assert.equal(loadSettings({ ...base, ORDER_INDEX_PARTITIONS: '1' }).orderIndexPartitions, 1);
  assert.equal(loadSettings({ ...base, ORDER_INDEX_PARTITIONS: '64' }).orderIndexPartitions, 64);
  for (const bad of ['0', '257', '8.5', 'many']) {
    assert.throws(
      () => loadSettings({ ...base, ORDER_INDEX_PARTITIONS: bad }),
      (e: unknown) =>
        e instanceof SettingsError &&
        e.setting === 'ORDER_INDEX_PARTITIONS' &&
        e.message.includes('from 1 to 256'),
      bad,
    );
  }
});

test('retention: ORDER_RETENTION_DAYS 90, IDEMPOTENCY_RETENTION_DAYS 365, ORDER_PURGE_RATE_PER_SECOND 20, ORDER_ARCHIVE on by default; bad values name the setting', () => {
  const r = loadSettings(base).retention;
  assert.equal(r.orderRetentionDays, 90);
  assert.equal(r.idempotencyRetentionDays, 365);
  assert.equal(r.purgeRatePerSecond, 20);
  assert.equal(r.archive, true);
  assert.deepEqual(r.archiveConnection, {
    kind: 'connectionString',
    connectionString: 'UseDevelopmentStorage=true',
  });
  assert.equal(loadSettings({ ...base, ORDER_RETENTION_DAYS: '0' }).retention.orderRetentionDays, 0);
  assert.equal(loadSettings({ ...base, ORDER_ARCHIVE: 'off' }).retention.archiveConnection, undefined);
  for (const [name, bad] of [
    ['ORDER_RETENTION_DAYS', '-1'],
    ['ORDER_RETENTION_DAYS', 'ninety'],
    ['IDEMPOTENCY_RETENTION_DAYS', '1.5'],
    ['ORDER_PURGE_RATE_PER_SECOND', '0'],
    ['ORDER_ARCHIVE', 'yes'],
  ] as const) {
    assert.throws(
      () => loadSettings({ ...base, [name]: bad }),
      (e: unknown) => e instanceof SettingsError && e.setting === name,
      `${name}=${bad}`,
    );
  }
});

test('retention: the archive follows the state store account; without a blob service it must be named or turned off', () => {
  const identity = {
    ...base,
    StateStoreConnection: undefined,
    StateStoreConnection__tableServiceUri: 'https://acct.table.core.windows.net/',
  };
  assert.deepEqual(loadSettings(identity).retention.archiveConnection, {
    kind: 'identity',
    blobServiceUri: 'https://acct.blob.core.windows.net',
  });
  const custom = {
    ...base,
    StateStoreConnection: undefined,
    StateStoreConnection__tableServiceUri: 'http://127.0.0.1:10002/devstoreaccount1',
  };
  assert.throws(
    () => loadSettings(custom),
    (e: unknown) => e instanceof SettingsError && e.setting === 'OrderArchiveConnection__blobServiceUri',
  );
  assert.equal(loadSettings({ ...custom, ORDER_ARCHIVE: 'off' }).retention.archive, false);
  assert.equal(loadSettings({ ...custom, ORDER_RETENTION_DAYS: '0' }).retention.archiveConnection, undefined);
  assert.deepEqual(
    loadSettings({
      ...custom,
      OrderArchiveConnection__blobServiceUri: 'http://127.0.0.1:10000/devstoreaccount1',
    }).retention.archiveConnection,
    { kind: 'identity', blobServiceUri: 'http://127.0.0.1:10000/devstoreaccount1' },
  );
  // An account key with only a table endpoint spelled out (Azurite with tables only): the blob
  // endpoint cannot be derived, so start-up names the setting instead of the blob SDK failing later.
  const tablesOnly = {
    ...base,
    StateStoreConnection:
      'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;',
  };
  assert.throws(
    () => loadSettings(tablesOnly),
    (e: unknown) => e instanceof SettingsError && e.setting === 'OrderArchiveConnection__blobServiceUri',
  );
  assert.equal(
    loadSettings({
      ...tablesOnly,
      StateStoreConnection: `${tablesOnly.StateStoreConnection}BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;`,
    }).retention.archive,
    true,
  );
  assert.throws(
    () => loadSettings({ ...custom, OrderArchiveConnection__blobServiceUri: 'not a url' }),
    (e: unknown) => e instanceof SettingsError && e.setting === 'OrderArchiveConnection__blobServiceUri',
  );
});
