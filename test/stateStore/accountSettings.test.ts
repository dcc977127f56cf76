import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadSettings, SettingsError } from '../../shared/config/settings.js';
import { orderWorkflow } from '../../shared/domain/index.js';
import { accountNumber } from '../../shared/stateStore/index.js';
import { partitionNumber } from '../../shared/stateStore/indexLayout.js';

/** Issue 23: StateStoreAccounts, validated at start-up naming the setting. */
const local =
  'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;';
const second =
  'DefaultEndpointsProtocol=http;AccountName=acct2;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:10002/acct2;';
const base = {
  ServiceBusConnection:
    'Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;',
  StateStoreConnection: local,
  // Tables-only connection strings: no blob service to archive to (test/config.test.ts covers that).
  ORDER_ARCHIVE: 'off',
  ...Object.fromEntries(
    orderWorkflow.steps.map((s, i) => [
      `${s.agent.toUpperCase().replace(/-/g, '_')}_SERVICE_URL`,
      `http://127.0.0.1:${i + 1}`,
    ]),
  ),
};
const refused = (env: Record<string, string | undefined>, message: RegExp) =>
  assert.throws(
    () => loadSettings(env),
    (e: unknown) =>
      e instanceof SettingsError && e.setting === 'StateStoreAccounts' && message.test(e.message),
  );

test('without StateStoreAccounts the one account is StateStoreConnection', () => {
  const s = loadSettings(base);
  assert.deepEqual(s.stateStoreAccounts, [s.stateStore]);
});

test('connection strings locally, endpoint URLs with managed identity, the first being the StateStoreConnection account', () => {
  const s = loadSettings({ ...base, StateStoreAccounts: `${local}, ${second}` });
  assert.deepEqual(s.stateStoreAccounts, [
    { kind: 'connectionString', connectionString: local },
    { kind: 'connectionString', connectionString: second },
  ]);
  const azure = loadSettings({
    ...base,
    StateStoreConnection: undefined,
    StateStoreConnection__tableServiceUri: 'https://st1.table.core.windows.net',
    StateStoreAccounts: 'https://st1.table.core.windows.net/,https://st2.table.core.windows.net',
  });
  assert.deepEqual(
    azure.stateStoreAccounts.map((a) => (a.kind === 'identity' ? a.tableServiceUri : '')),
    ['https://st1.table.core.windows.net', 'https://st2.table.core.windows.net'],
  );
});

test('a bad list fails naming StateStoreAccounts', () => {
  refused(
    { ...base, StateStoreAccounts: `${second},${local}` },
    /first entry must be the StateStoreConnection account/,
  );
  refused({ ...base, StateStoreAccounts: `${local},,${second}` }, /empty entry/);
  refused({ ...base, StateStoreAccounts: `${local},AccountName=x` }, /entry 2 is neither/);
  refused({ ...base, StateStoreAccounts: `${local},https://` }, /entry 2 is not an http\(s\) URL/);
  refused(
    { ...base, StateStoreAccounts: `${local},${second},${second}` },
    /entry 3 names an account listed before it/,
  );
});

test("an order's account follows from its id, evenly, and apart from its index partition", () => {
  const ids = Array.from(
    { length: 4000 },
    (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
  );
  const per = [0, 0, 0, 0];
  for (const id of ids) per[accountNumber(id, 4)] += 1;
  for (const n of per) assert.ok(n > 850 && n < 1150, per.join('/'));
  assert.equal(accountNumber(ids[7], 1), 0);
  assert.equal(accountNumber(ids[7], 4), accountNumber(ids[7], 4));
  // Within account 0 of 2, the orders still use every partition of the state index.
  const partitions = new Set(
    ids.filter((id) => accountNumber(id, 2) === 0).map((id) => partitionNumber(id, 32)),
  );
  assert.equal(partitions.size, 32);
});
