/**
 * Drift between the Azure deployment (infra/*.bicep), the local Service Bus declaration
 * (infra/servicebus-emulator/Config.json), the sample settings and the names the app uses.
 * No Bicep CLI or Azure here: the Bicep files are read as text. Each check also runs on a
 * deliberately broken copy, to prove it can fail.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { settingNames } from '../../shared/config/settings.js';
import { queues as appQueues, topics as appTopics } from '../../shared/messaging/entities.js';
import {
  bicepAppSettings,
  checkAppEntities,
  checkEntitiesFromConfig,
  checkLoadsEmulatorConfig,
  checkLocalAuthDisabled,
  checkNoSecrets,
  checkRbac,
  checkSettings,
  entityNames,
  type BicepFile,
  type EmulatorConfig,
  type LocalSettings,
} from './drift-checks.js';

// Compiled to dist/test/infra; the sources live at the repository root.
const root = resolve(__dirname, '..', '..', '..');
const configPath = 'infra/servicebus-emulator/Config.json';

function read(path: string): string {
  return readFileSync(join(root, path), 'utf8');
}

function filesUnder(dir: string): BicepFile[] {
  const out: BicepFile[] = [];
  const walk = (abs: string) => {
    for (const name of readdirSync(abs)) {
      const full = join(abs, name);
      if (statSync(full).isDirectory()) walk(full);
      else out.push({ path: relative(root, full).split(sep).join('/'), text: readFileSync(full, 'utf8') });
    }
  };
  walk(join(root, dir));
  return out;
}

const infraFiles = filesUnder('infra');
const bicepFiles = infraFiles.filter((f) => f.path.endsWith('.bicep'));
const bicep = (path: string): BicepFile => {
  const f = bicepFiles.find((b) => b.path === path);
  assert.ok(f, `${path} exists`);
  return f;
};
const config = JSON.parse(read(configPath)) as EmulatorConfig;
const localSettings = JSON.parse(read('local.settings.sample.json')) as LocalSettings;
const appUses = { queues: Object.values(appQueues), topics: Object.values(appTopics) };

/** A copy of `file` with `from` replaced; fails if `from` is not there (a mutation must bite). */
function broken(file: BicepFile, from: string | RegExp, to: string): BicepFile {
  assert.ok(
    typeof from === 'string' ? file.text.includes(from) : from.test(file.text),
    `mutation target ${from} in ${file.path}`,
  );
  return { path: file.path, text: file.text.replace(from, to) };
}
function withFile(files: BicepFile[], changed: BicepFile): BicepFile[] {
  return files.map((f) => (f.path === changed.path ? changed : f));
}
function reports(problems: string[], pattern: RegExp): void {
  assert.ok(
    problems.some((p) => pattern.test(p)),
    `expected a problem matching ${pattern}, got: ${JSON.stringify(problems)}`,
  );
}

test('the repository root was found and holds the infra files', () => {
  assert.ok(existsSync(join(root, 'package.json')));
  for (const path of [
    'azure.yaml',
    'infra/main.bicep',
    'infra/main.parameters.json',
    'infra/abbreviations.json',
  ]) {
    assert.ok(existsSync(join(root, path)), `${path} exists`);
  }
  assert.ok(bicepFiles.length >= 6, `found ${bicepFiles.map((f) => f.path).join(', ')}`);
});

test('every queue and topic the app names exists in Config.json', () => {
  const known = entityNames(config);
  for (const q of appUses.queues) assert.ok(known.queues.includes(q), `queue ${q} in Config.json`);
  for (const t of appUses.topics) assert.ok(known.topics.includes(t), `topic ${t} in Config.json`);
  const missing = structuredClone(config);
  missing.UserConfig.Namespaces[0].Queues = missing.UserConfig.Namespaces[0].Queues?.filter(
    (q) => q.Name !== 'agent-payment',
  );
  assert.ok(!entityNames(missing).queues.includes('agent-payment'));
});

test('servicebus.bicep loads Config.json itself (loadJsonContent, path relative to the file)', () => {
  const sb = bicep('infra/app/servicebus.bicep');
  assert.deepEqual(checkLoadsEmulatorConfig(sb, configPath), []);
  reports(
    checkLoadsEmulatorConfig(
      broken(sb, "'../servicebus-emulator/Config.json'", "'./Config.json'"),
      configPath,
    ),
    /loads infra\/app\/Config\.json/,
  );
  reports(
    checkLoadsEmulatorConfig(broken(sb, /loadJsonContent\([^)]*\)/, "json('{}')"), configPath),
    /does not loadJsonContent/,
  );
  reports(
    checkLoadsEmulatorConfig(broken(sb, '.Namespaces[0]', '.Namespaces[1]'), configPath),
    /Namespaces\[0\]/,
  );
});

test('Bicep declares exactly the Config.json queues, topics and subscriptions, every property mapped', () => {
  assert.deepEqual(checkEntitiesFromConfig(bicepFiles, config), []);
  const sb = bicep('infra/app/servicebus.bicep');
  const check = (file: BicepFile) => checkEntitiesFromConfig(withFile(bicepFiles, file), config);

  reports(
    check(broken(sb, 'maxDeliveryCount: queue.Properties.MaxDeliveryCount', 'maxDeliveryCount: 10')),
    /maxDeliveryCount is not set from queue\.Properties\.MaxDeliveryCount/,
  );
  reports(
    check(broken(sb, /\n\s*lockDuration: subscription\.Properties\.LockDuration/, '')),
    /lockDuration is not set from subscription/,
  );
  reports(
    check(
      broken(
        sb,
        'requiresDuplicateDetection: topic.Properties.RequiresDuplicateDetection',
        'requiresDuplicateDetection: true',
      ),
    ),
    /requiresDuplicateDetection is not set from topic/,
  );
  reports(
    check(broken(sb, /forwardTo: empty\(queue[^\n]*/, 'forwardTo: queue.Properties.?ForwardTo')),
    /forwardTo is not omitted/,
  );
  reports(
    check(broken(sb, 'for queue in entities.Queues', 'for queue in handWrittenQueues')),
    /does not loop over Config\.json queues/,
  );
  reports(
    check(broken(sb, /\n\s*name: queue\.Name/, "\n  name: 'hand-written'")),
    /name is not taken from queue\.Name/,
  );
  reports(check(broken(sb, 'map(topic.Subscriptions', 'map([]')), /subscriptions are not derived/);

  // A hand-written entity anywhere else is drift too.
  const extra = broken(
    bicep('infra/app/rbac.bicep'),
    'resource alertsQueue',
    "resource rogue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {\n  parent: namespace\n  name: 'rogue'\n}\n\nresource alertsQueue",
  );
  reports(check(extra), /expected one queue resource/);

  // A property Config.json gains but Bicep does not map is reported.
  const grown = structuredClone(config);
  grown.UserConfig.Namespaces[0].Queues![0].Properties!.AutoDeleteOnIdle = 'PT1H';
  reports(checkEntitiesFromConfig(bicepFiles, grown), /AutoDeleteOnIdle has no ARM mapping/);
  const two = structuredClone(config);
  two.UserConfig.Namespaces.push({ Name: 'second', Queues: [] });
  reports(checkEntitiesFromConfig(bicepFiles, two), /declares 2 namespaces/);
});

test('entity names written by hand in main.bicep (RBAC, alerts) are all in Config.json and cover the app', () => {
  const main = bicep('infra/main.bicep');
  assert.deepEqual(checkAppEntities(main.text, config, appUses), []);
  reports(
    checkAppEntities(
      broken(main, "sendsToTopics: ['order-status']", "sendsToTopics: ['order-events']").text,
      config,
      appUses,
    ),
    /order-events, which Config\.json does not declare/,
  );
  reports(
    checkAppEntities(
      broken(main, "operatorAlertsQueue: 'operator-alerts'", "operatorAlertsQueue: 'ops'").text,
      config,
      appUses,
    ),
    /names ops/,
  );
  reports(
    checkAppEntities(
      broken(main, "'agent-shipping', 'operator-alerts']", "'agent-shipping']").text,
      config,
      appUses,
    ),
    /queue operator-alerts but no role/,
  );
  reports(
    checkAppEntities(
      broken(main, "sendsToQueues: ['scheduler',", "sendsToQueues: ['order-status',").text,
      config,
      appUses,
    ),
    /order-status as a queue/,
  );
});

test('every setting the app reads is in local.settings.sample.json and in the Bicep app settings', () => {
  const names = Object.values(settingNames);
  const api = bicep('infra/app/api.bicep');
  const settings = bicepAppSettings(api.text);
  assert.ok(settings.size > 10, `parsed ${[...settings.keys()].join(', ')}`);
  assert.deepEqual(checkSettings(names, localSettings, settings), []);

  const withoutLine = (re: RegExp) => bicepAppSettings(broken(api, re, '').text);
  reports(
    checkSettings(names, localSettings, withoutLine(/\n\s*SUPERVISOR_SCHEDULE:[^\n]*/)),
    /SUPERVISOR_SCHEDULE missing from the Bicep/,
  );
  reports(
    checkSettings(names, localSettings, withoutLine(/\n\s*StateStoreConnection__tableServiceUri:[^\n]*/)),
    /StateStoreConnection__tableServiceUri missing from the Bicep/,
  );
  reports(
    checkSettings(names, localSettings, withoutLine(/\n\s*AzureWebJobsStorage__clientId:[^\n]*/)),
    /AzureWebJobsStorage__clientId missing/,
  );
  reports(
    checkSettings(
      names,
      localSettings,
      bicepAppSettings(
        broken(
          api,
          "ServiceBusConnection__credential: 'managedidentity'",
          "ServiceBusConnection__credential: 'connectionstring'",
        ).text,
      ),
    ),
    /ServiceBusConnection__credential has an unexpected value/,
  );
  const keyed = broken(
    api,
    '  AZURE_CLIENT_ID:',
    "  ServiceBusConnection: 'Endpoint=sb://x'\n  AZURE_CLIENT_ID:",
  );
  reports(
    checkSettings(names, localSettings, bicepAppSettings(keyed.text)),
    /ServiceBusConnection is set in Bicep/,
  );
  const runtime = broken(api, '  AZURE_CLIENT_ID:', "  FUNCTIONS_WORKER_RUNTIME: 'node'\n  AZURE_CLIENT_ID:");
  reports(checkSettings(names, localSettings, bicepAppSettings(runtime.text)), /FUNCTIONS_WORKER_RUNTIME/);

  const localMissing: LocalSettings = structuredClone(localSettings);
  delete localMissing.Values.FAILURE_HARD_THRESHOLD;
  reports(
    checkSettings(names, localMissing, settings),
    /FAILURE_HARD_THRESHOLD missing from local\.settings\.sample\.json Values/,
  );
  const azureMissing: LocalSettings = structuredClone(localSettings);
  delete azureMissing._inAzure!.ServiceBusConnection__fullyQualifiedNamespace;
  reports(
    checkSettings(names, azureMissing, settings),
    /ServiceBusConnection__fullyQualifiedNamespace missing from local\.settings\.sample\.json _inAzure/,
  );
  reports(checkSettings([...names, 'NEW_SETTING'], localSettings, settings), /NEW_SETTING missing/);
});

test('no keys, SAS or secret-bearing connection strings anywhere in infra/', () => {
  assert.deepEqual(checkNoSecrets(infraFiles), []);
  const sb = bicep('infra/app/servicebus.bicep');
  const api = bicep('infra/app/api.bicep');
  reports(
    checkNoSecrets([
      broken(
        sb,
        'output name string',
        "output key string = namespace.listKeys('RootManageSharedAccessKey', '2024-01-01').primaryKey\noutput name string",
      ),
    ]),
    /listKeys/,
  );
  reports(
    checkNoSecrets([
      broken(
        api,
        '  AZURE_CLIENT_ID:',
        "  X: 'DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc'\n  AZURE_CLIENT_ID:",
      ),
    ]),
    /AccountKey=/,
  );
  reports(
    checkNoSecrets([
      broken(
        api,
        '  AZURE_CLIENT_ID:',
        "  X: 'Endpoint=sb://a/;SharedAccessKeyName=k;SharedAccessKey=v'\n  AZURE_CLIENT_ID:",
      ),
    ]),
    /SharedAccessKey=/,
  );
  reports(
    checkNoSecrets([
      broken(
        api,
        '  AZURE_CLIENT_ID:',
        '  StateStoreConnectionString: storage.properties.x\n  AZURE_CLIENT_ID:',
      ),
    ]),
    /uses a connection string/,
  );
});

test('local auth is disabled on Service Bus, Storage and Application Insights', () => {
  assert.deepEqual(checkLocalAuthDisabled(bicepFiles), []);
  const check = (f: BicepFile) => checkLocalAuthDisabled(withFile(bicepFiles, f));
  reports(
    check(broken(bicep('infra/app/servicebus.bicep'), 'disableLocalAuth: true', 'disableLocalAuth: false')),
    /disableLocalAuth: true/,
  );
  reports(
    check(broken(bicep('infra/app/servicebus.bicep'), "name: 'Standard'", "name: 'Basic'")),
    /sku name 'Standard'/,
  );
  reports(
    check(
      broken(bicep('infra/app/storage.bicep'), 'allowSharedKeyAccess: false', 'allowSharedKeyAccess: true'),
    ),
    /allowSharedKeyAccess: false/,
  );
  reports(
    check(
      broken(bicep('infra/app/storage.bicep'), 'allowBlobPublicAccess: false', 'allowBlobPublicAccess: true'),
    ),
    /allowBlobPublicAccess/,
  );
  reports(
    check(
      broken(bicep('infra/app/storage.bicep'), "minimumTlsVersion: 'TLS1_2'", "minimumTlsVersion: 'TLS1_0'"),
    ),
    /TLS1_2/,
  );
  reports(
    check(broken(bicep('infra/app/monitoring.bicep'), 'DisableLocalAuth: true', 'DisableLocalAuth: false')),
    /DisableLocalAuth/,
  );
});

test('role assignments: guid() names, verified built-in role ids, Service Bus roles per entity', () => {
  const rbac = bicep('infra/app/rbac.bicep');
  assert.deepEqual(checkRbac(rbac), []);
  reports(
    checkRbac(
      broken(
        rbac,
        "serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'",
        "serviceBusDataSender: '090c5cfd-751d-490a-894a-3ce6f1109419'",
      ),
    ),
    /serviceBusDataSender/,
  );
  reports(
    checkRbac(broken(rbac, /name: guid\(applicationInsights\.id[^\n]*/, "name: 'fixed-name'")),
    /appTelemetry: name is not a guid/,
  );
  reports(
    checkRbac(broken(rbac, 'scope: receiveQueues[i]', 'scope: namespace')),
    /scoped to the whole namespace/,
  );
});

test('the Function App runs on Flex Consumption, Node 20, deploying with its identity; azd finds it', () => {
  const api = bicep('infra/app/api.bicep').text;
  assert.match(api, /tier: 'FlexConsumption'\s*\n\s*name: 'FC1'/);
  assert.match(api, /runtime: \{\s*name: 'node'\s*version: '20'\s*\}/);
  assert.match(api, /type: 'UserAssignedIdentity'\s*\n\s*userAssignedIdentityResourceId: identityId/);
  assert.match(api, /'azd-service-name': 'api'/);
  const yaml = read('azure.yaml');
  assert.match(yaml, /services:\s*\n\s+api:\s*\n(\s+\w+: .+\n){3}/);
  for (const line of [/project: \.\s*$/m, /language: ts\s*$/m, /host: function\s*$/m])
    assert.match(yaml, line);
  const main = bicep('infra/main.bicep').text;
  assert.match(main, /^targetScope = 'subscription'/m);
  assert.match(
    main,
    /resourceToken = toLower\(uniqueString\(subscription\(\)\.id, environmentName, location\)\)/,
  );
  for (const output of ['AZURE_LOCATION', 'AZURE_TENANT_ID', 'AZURE_FUNCTION_NAME', 'SERVICE_API_NAME']) {
    assert.match(main, new RegExp(`^output ${output} string`, 'm'));
  }
  const params = JSON.parse(read('infra/main.parameters.json')) as { parameters: Record<string, unknown> };
  for (const p of [
    'environmentName',
    'location',
    'principalId',
    'inventoryServiceUrl',
    'paymentServiceUrl',
    'shippingServiceUrl',
  ]) {
    assert.ok(p in params.parameters, `main.parameters.json maps ${p}`);
    assert.match(main, new RegExp(`^param ${p} string`, 'm'));
  }
});
