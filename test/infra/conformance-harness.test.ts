/**
 * How the Service Bus conformance suite picks its namespace (emulators/servicebus/conformance/
 * harness.ts): the in-repo emulator by default, a connection string, or an Azure namespace signed
 * in with Entra ID (the only way into a namespace with SAS disabled, such as the one
 * infra/conformance/main.bicep creates). No network: clients are created, never connected.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  connectionStringVariable,
  namespaceVariable,
  newClient,
  openNamespace,
  parseNamespaceHost,
} from '../../emulators/servicebus/conformance/harness.js';

async function withEnv<T>(env: Record<string, string | undefined>, run: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  const set = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  set(env);
  try {
    return await run();
  } finally {
    set(saved);
  }
}

test('SERVICEBUS_CONFORMANCE_NAMESPACE takes a fully qualified namespace', () => {
  assert.equal(parseNamespaceHost('myns.servicebus.windows.net'), 'myns.servicebus.windows.net');
  assert.equal(parseNamespaceHost(' sb://myns.servicebus.windows.net/ '), 'myns.servicebus.windows.net');
  assert.throws(() => parseNamespaceHost('myns'), /fully qualified namespace/);
  assert.throws(
    () =>
      parseNamespaceHost(
        'Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v',
      ),
    /fully qualified namespace/,
  );
});

test('with SERVICEBUS_CONFORMANCE_NAMESPACE the suite signs in with DefaultAzureCredential', async () => {
  await withEnv(
    { [namespaceVariable]: 'sbconf-test.servicebus.windows.net', [connectionStringVariable]: undefined },
    async () => {
      const ns = await openNamespace();
      try {
        assert.equal(ns.external, true);
        assert.equal(ns.connectionString, undefined);
        assert.equal(ns.fullyQualifiedNamespace, 'sbconf-test.servicebus.windows.net');
        assert.equal(ns.credential?.constructor.name, 'DefaultAzureCredential');
        const client = newClient(ns);
        assert.equal(client.fullyQualifiedNamespace, 'sbconf-test.servicebus.windows.net');
        await client.close();
      } finally {
        await ns.close();
      }
    },
  );
});

test('a connection string still works, and setting both variables is refused', async () => {
  const cs =
    'Endpoint=sb://localhost:5672/;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true';
  await withEnv({ [connectionStringVariable]: cs, [namespaceVariable]: undefined }, async () => {
    const ns = await openNamespace();
    assert.equal(ns.connectionString, cs);
    assert.equal(ns.credential, undefined);
    const client = newClient(ns);
    assert.equal(client.fullyQualifiedNamespace, 'localhost');
    await client.close();
  });
  await withEnv(
    { [connectionStringVariable]: cs, [namespaceVariable]: 'a.servicebus.windows.net' },
    async () => {
      await assert.rejects(openNamespace(), /either SERVICEBUS_CONFORMANCE_CONNECTION_STRING or/);
    },
  );
});
