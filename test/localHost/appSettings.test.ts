import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { spawnLocalHost } from '../../local/host/index.js';
import { loadSettings, SettingsError } from '../../shared/config/settings.js';

/**
 * The app's own settings are checked when the host loads it: a malformed connection setting stops
 * start-up with one message naming the setting and what is wrong with it (never a ready host whose
 * routes answer 500), and a setting with a documented default may be left out. The real app, in the
 * local host as a child process, as `npm start` runs it.
 */
const repoRoot = join(__dirname, '..', '..', '..');

/** Valid settings that need nothing running: the broker and the services are never reached here. */
const valid: Record<string, string> = {
  ServiceBusConnection:
    'Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;',
  StateStoreConnection: 'UseDevelopmentStorage=true',
  INVENTORY_SERVICE_URL: 'http://127.0.0.1:1',
  PAYMENT_SERVICE_URL: 'http://127.0.0.1:1',
  SHIPPING_SERVICE_URL: 'http://127.0.0.1:1',
  SUPERVISOR_SCHEDULE: '*/30 * * * * *',
};

/** Starts the app; the host's output when it refused to start, undefined when it got ready (then stopped). */
async function refusal(env: Record<string, string>): Promise<string | undefined> {
  try {
    const host = await spawnLocalHost({ appRoot: repoRoot, env, readyTimeoutMs: 30_000 });
    await host.kill('SIGTERM');
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

describe('app settings at start-up', { concurrency: true }, () => {
  it('StateStoreConnection=garbage: start-up fails naming the setting', async () => {
    const out = await refusal({ ...valid, StateStoreConnection: 'garbage' });
    assert.ok(out, 'the host got ready with a malformed StateStoreConnection');
    assert.match(out, /App setting StateStoreConnection: .*connection string/);
  });

  it('ServiceBusConnection=Endpoint=garbage: start-up fails naming the setting', async () => {
    const out = await refusal({ ...valid, ServiceBusConnection: 'Endpoint=garbage' });
    assert.ok(out, 'the host got ready with a malformed ServiceBusConnection');
    assert.match(out, /App setting ServiceBusConnection: /);
  });

  it('without SUPERVISOR_SCHEDULE the Supervisor runs on its documented default', async () => {
    const env = { ...valid };
    delete env.SUPERVISOR_SCHEDULE;
    assert.equal(process.env.SUPERVISOR_SCHEDULE, undefined, 'the test process must not set it');
    const host = await spawnLocalHost({ appRoot: repoRoot, env, readyTimeoutMs: 30_000 }).catch((e: Error) =>
      assert.fail(e.message.slice(0, 2000)),
    );
    try {
      const supervisor = host.functions.find((f) => f.name === 'supervisor');
      assert.deepEqual(supervisor, { name: 'supervisor', trigger: 'timer', detail: '*/30 * * * * *' });
    } finally {
      await host.kill('SIGTERM');
    }
  });

  it('a malformed SUPERVISOR_SCHEDULE fails start-up naming the setting', async () => {
    const out = await refusal({ ...valid, SUPERVISOR_SCHEDULE: 'every minute' });
    assert.ok(out, 'the host got ready');
    assert.match(out, /App setting SUPERVISOR_SCHEDULE: /);
  });
});

describe('connection settings, parsed', () => {
  const bad = (env: Record<string, string | undefined>, setting: string, why: RegExp) =>
    assert.throws(
      () => loadSettings({ ...valid, ...env }),
      (e: unknown) => e instanceof SettingsError && e.setting === setting && why.test(e.message),
      `${JSON.stringify(env)}`,
    );

  it('refuses storage connection strings the table SDK cannot use', () => {
    bad({ StateStoreConnection: 'garbage' }, 'StateStoreConnection', /key=value/);
    bad({ StateStoreConnection: 'AccountName=a' }, 'StateStoreConnection', /AccountKey|TableEndpoint/);
    bad(
      { StateStoreConnection: 'DefaultEndpointsProtocol=https;AccountName=a;AccountKey=' },
      'StateStoreConnection',
      /AccountKey/,
    );
    bad(
      { StateStoreConnection: 'TableEndpoint=nope;SharedAccessSignature=sv=1' },
      'StateStoreConnection',
      /TableEndpoint/,
    );
  });

  it('accepts the storage connection strings Azurite and Azure hand out', () => {
    for (const cs of [
      'UseDevelopmentStorage=true',
      'DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net',
      'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;',
      'TableEndpoint=https://acct.table.core.windows.net/;SharedAccessSignature=sv=2022-11-02&sig=x',
    ])
      assert.equal(
        // The archive is retention's concern (test/config.test.ts), not this connection string's.
        loadSettings({ ...valid, StateStoreConnection: cs, ORDER_ARCHIVE: 'off' }).stateStore.kind,
        'connectionString',
        cs,
      );
  });

  it('refuses Service Bus connection strings without an endpoint or a credential', () => {
    bad({ ServiceBusConnection: 'Endpoint=garbage' }, 'ServiceBusConnection', /Endpoint|SharedAccessKeyName/);
    bad({ ServiceBusConnection: 'garbage' }, 'ServiceBusConnection', /key=value/);
    bad(
      { ServiceBusConnection: 'Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k' },
      'ServiceBusConnection',
      /SharedAccessKey/,
    );
  });

  it('identity-based connections keep working, and a malformed one names its setting', () => {
    const identity = {
      ServiceBusConnection: undefined,
      StateStoreConnection: undefined,
      ServiceBusConnection__fullyQualifiedNamespace: 'ns.servicebus.windows.net',
      StateStoreConnection__tableServiceUri: 'https://acct.table.core.windows.net/',
    };
    const s = loadSettings({ ...valid, ...identity });
    assert.equal(s.serviceBus.kind, 'identity');
    assert.equal(s.stateStore.kind, 'identity');
    bad(
      { ...identity, ServiceBusConnection__fullyQualifiedNamespace: 'sb://ns.servicebus.windows.net/' },
      'ServiceBusConnection__fullyQualifiedNamespace',
      /host name/,
    );
  });
});
