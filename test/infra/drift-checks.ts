/**
 * Checks that keep infra/ (Azure), infra/servicebus-emulator/Config.json (local Service Bus),
 * local.settings.sample.json and the app's own names in step. Each check takes texts and
 * returns the problems it found, so the tests can run it on the real files (expect none) and
 * on deliberately broken copies (expect the break to be reported).
 */
import { posix } from 'node:path';
import {
  resources,
  stripComments,
  stringLiterals,
  topLevelKeys,
  valueOf,
  type ResourceDecl,
} from './bicep-text.js';

export interface EmulatorEntity {
  Name: string;
  Properties?: Record<string, unknown>;
  Subscriptions?: EmulatorEntity[];
}
export interface EmulatorConfig {
  UserConfig: { Namespaces: { Name: string; Queues?: EmulatorEntity[]; Topics?: EmulatorEntity[] }[] };
}

/** Config.json property → ARM property. Forwarding targets are omitted when empty. */
export const propertyMap: Record<string, string> = {
  DeadLetteringOnMessageExpiration: 'deadLetteringOnMessageExpiration',
  DefaultMessageTimeToLive: 'defaultMessageTimeToLive',
  DuplicateDetectionHistoryTimeWindow: 'duplicateDetectionHistoryTimeWindow',
  ForwardDeadLetteredMessagesTo: 'forwardDeadLetteredMessagesTo',
  ForwardTo: 'forwardTo',
  LockDuration: 'lockDuration',
  MaxDeliveryCount: 'maxDeliveryCount',
  RequiresDuplicateDetection: 'requiresDuplicateDetection',
  RequiresSession: 'requiresSession',
};
const optionalWhenEmpty = new Set(['ForwardTo', 'ForwardDeadLetteredMessagesTo']);

const entityTypes = {
  queue: 'Microsoft.ServiceBus/namespaces/queues',
  topic: 'Microsoft.ServiceBus/namespaces/topics',
  subscription: 'Microsoft.ServiceBus/namespaces/topics/subscriptions',
} as const;

export interface BicepFile {
  /** Path relative to the repository root, with forward slashes. */
  path: string;
  text: string;
}

function declared(files: BicepFile[], type: string): (ResourceDecl & { file: string })[] {
  return files.flatMap((f) =>
    resources(stripComments(f.text))
      .filter((r) => r.type === type && !r.existing)
      .map((r) => ({ ...r, file: f.path })),
  );
}

/** The one namespace of Config.json (Bicep reads Namespaces[0]; a second would be ignored). */
export function emulatorNamespace(
  config: EmulatorConfig,
): { problems: string[] } & EmulatorConfig['UserConfig']['Namespaces'][number] {
  const namespaces = config.UserConfig?.Namespaces ?? [];
  const problems =
    namespaces.length === 1
      ? []
      : [`Config.json declares ${namespaces.length} namespaces; Bicep deploys exactly one`];
  return { problems, ...(namespaces[0] ?? { Name: '' }) };
}

export function entityNames(config: EmulatorConfig): {
  queues: string[];
  topics: string[];
  subscriptions: string[];
} {
  const ns = emulatorNamespace(config);
  return {
    queues: (ns.Queues ?? []).map((q) => q.Name),
    topics: (ns.Topics ?? []).map((t) => t.Name),
    subscriptions: (ns.Topics ?? []).flatMap((t) =>
      (t.Subscriptions ?? []).map((s) => `${t.Name}/${s.Name}`),
    ),
  };
}

/**
 * servicebus.bicep must load Config.json itself (path relative to the Bicep file, per the
 * Bicep docs for loadJsonContent) and take the entities from UserConfig.Namespaces[0].
 */
export function checkLoadsEmulatorConfig(file: BicepFile, configPath: string): string[] {
  const text = stripComments(file.text);
  const m = /loadJsonContent\(\s*'([^']+)'\s*\)/.exec(text);
  if (!m) return [`${file.path} does not loadJsonContent the emulator Config.json`];
  const resolved = posix.normalize(posix.join(posix.dirname(file.path), m[1]));
  const problems: string[] = [];
  if (resolved !== configPath) problems.push(`${file.path} loads ${resolved}, not ${configPath}`);
  if (!/\.UserConfig\.Namespaces\[0\]/.test(text))
    problems.push(`${file.path} does not read UserConfig.Namespaces[0]`);
  return problems;
}

interface EntityLoopSpec {
  kind: keyof typeof entityTypes;
  /** What the loop must iterate over, as a regular expression on the loop source. */
  source: RegExp;
  entities: EmulatorEntity[];
  /** How the resource name must be built from the loop variable. */
  name: (variable: string) => RegExp;
}

function checkEntityLoop(files: BicepFile[], spec: EntityLoopSpec): string[] {
  const decls = declared(files, entityTypes[spec.kind]);
  if (decls.length !== 1) {
    return [
      `expected one ${spec.kind} resource (a loop over Config.json), found ${decls.length}: ${decls.map((d) => `${d.file}:${d.symbol}`).join(', ')}`,
    ];
  }
  const [decl] = decls;
  if (!decl.loop || !spec.source.test(decl.loop.source)) {
    return [
      `${decl.file}:${decl.symbol} does not loop over Config.json ${spec.kind}s (loops over ${decl.loop?.source ?? 'nothing'})`,
    ];
  }
  const v = decl.loop.variable;
  const problems: string[] = [];
  if (!spec.name(v).test(decl.body)) problems.push(`${decl.symbol}: name is not taken from ${v}.Name`);
  const keys = new Set(spec.entities.flatMap((e) => Object.keys(e.Properties ?? {})));
  for (const key of keys) {
    const arm = propertyMap[key];
    if (!arm) {
      problems.push(`Config.json ${spec.kind} property ${key} has no ARM mapping in the drift test or Bicep`);
      continue;
    }
    const ref = optionalWhenEmpty.has(key)
      ? `${v}\\.Properties\\.\\?${key}`
      : `${v}\\.Properties\\.\\??${key}\\b`;
    const line = new RegExp(`\\n\\s*${arm}\\s*:[^\\n]*${ref}`);
    if (!line.test(decl.body)) problems.push(`${decl.symbol}: ${arm} is not set from ${v}.Properties.${key}`);
    if (
      optionalWhenEmpty.has(key) &&
      !new RegExp(`\\n\\s*${arm}\\s*:\\s*empty\\([^\\n]*\\?\\s*null\\s*:`).test(decl.body)
    ) {
      problems.push(`${decl.symbol}: ${arm} is not omitted (null) when ${key} is empty`);
    }
  }
  return problems;
}

/** Queues, topics and subscriptions in Bicep are exactly Config.json's, property for property. */
export function checkEntitiesFromConfig(files: BicepFile[], config: EmulatorConfig): string[] {
  const ns = emulatorNamespace(config);
  const subs = (ns.Topics ?? []).flatMap((t) => t.Subscriptions ?? []);
  const problems = [...ns.problems];
  problems.push(
    ...checkEntityLoop(files, {
      kind: 'queue',
      source: /^\w+\.Queues$/,
      entities: ns.Queues ?? [],
      name: (v) => new RegExp(`\\n\\s*name:\\s*${v}\\.Name\\s*\\n`),
    }),
    ...checkEntityLoop(files, {
      kind: 'topic',
      source: /^\w+\.Topics$/,
      entities: ns.Topics ?? [],
      name: (v) => new RegExp(`\\n\\s*name:\\s*${v}\\.Name\\s*\\n`),
    }),
    ...checkEntityLoop(files, {
      kind: 'subscription',
      source: /^\w+$/,
      entities: subs,
      name: (v) =>
        new RegExp(`\\n\\s*name:\\s*'\\$\\{\\w+\\.name\\}/\\$\\{${v}\\.topicName\\}/\\$\\{${v}\\.Name\\}'`),
    }),
  );
  // The flattened subscription list must itself come from Config.json's topics.
  const sb = files.map((f) => stripComments(f.text)).join('\n');
  if (!/flatten\(\s*map\(\s*\w+\.Topics\s*,\s*(\w+)\s*=>\s*map\(\s*\1\.Subscriptions\b/.test(sb)) {
    problems.push('topic subscriptions are not derived from Config.json Topics[].Subscriptions');
  }
  return problems;
}

/**
 * Entity names the Bicep names by hand (for RBAC scopes and alerts) live in one `appEntities`
 * block in main.bicep; each must exist in Config.json, and together they must cover every
 * entity the app uses.
 */
export function checkAppEntities(
  mainBicep: string,
  config: EmulatorConfig,
  app: { queues: string[]; topics: string[] },
): string[] {
  const block = valueOf(stripComments(mainBicep), 'appEntities');
  if (!block) return ['main.bicep has no appEntities block'];
  const known = entityNames(config);
  const problems: string[] = [];
  for (const name of stringLiterals(block)) {
    if (!known.queues.includes(name) && !known.topics.includes(name)) {
      problems.push(`main.bicep appEntities names ${name}, which Config.json does not declare`);
    }
  }
  const list = (key: string) => stringLiterals(valueOf(block, key) ?? '');
  const receives = list('receivesFromQueues');
  const sendsQ = list('sendsToQueues');
  const sendsT = list('sendsToTopics');
  for (const q of receives.concat(sendsQ)) {
    if (!known.queues.includes(q))
      problems.push(`appEntities uses ${q} as a queue, but it is not a Config.json queue`);
  }
  for (const t of sendsT) {
    if (!known.topics.includes(t))
      problems.push(`appEntities uses ${t} as a topic, but it is not a Config.json topic`);
  }
  for (const q of app.queues) {
    if (!receives.includes(q) && !sendsQ.includes(q))
      problems.push(`the app uses queue ${q} but no role is granted on it`);
  }
  for (const t of app.topics) {
    if (!sendsT.includes(t))
      problems.push(`the app sends to topic ${t} but no Data Sender role is granted on it`);
  }
  return problems;
}

/** Keys of the app settings object in api.bicep. */
export function bicepAppSettings(apiBicep: string): Map<string, string> {
  const body = valueOf(stripComments(apiBicep), 'appSettings');
  const settings = new Map<string, string>();
  if (!body) return settings;
  for (const key of topLevelKeys(body)) {
    const m = new RegExp(`\\n\\s*${key}\\s*:\\s*([^\\n]*)`).exec(body);
    settings.set(key, m ? m[1].trim() : '');
  }
  return settings;
}

export interface LocalSettings {
  Values: Record<string, string>;
  _inAzure?: Record<string, string>;
}

/**
 * The connection settings: locally a connection string under the plain name, in Azure the
 * identity-based `__` form. Keyed by the local name.
 */
export const connectionPairs: Record<string, string> = {
  ServiceBusConnection: 'ServiceBusConnection__fullyQualifiedNamespace',
  StateStoreConnection: 'StateStoreConnection__tableServiceUri',
};

/** Identity settings the host and SDKs need in Azure besides the app's own names. */
export const identitySettings: Record<string, string | RegExp> = {
  AzureWebJobsStorage__blobServiceUri: /primaryEndpoints\.blob/,
  AzureWebJobsStorage__queueServiceUri: /primaryEndpoints\.queue/,
  AzureWebJobsStorage__tableServiceUri: /primaryEndpoints\.table/,
  AzureWebJobsStorage__credential: "'managedidentity'",
  AzureWebJobsStorage__clientId: /clientId/i,
  ServiceBusConnection__credential: "'managedidentity'",
  ServiceBusConnection__clientId: /clientId/i,
  AZURE_CLIENT_ID: /clientId/i,
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: /ClientId=\$\{\w+\};Authorization=AAD/,
};

/** Every setting the app reads is set locally and in Azure, in the right form for each. */
export function checkSettings(
  appSettingNames: string[],
  local: LocalSettings,
  bicep: Map<string, string>,
): string[] {
  const problems: string[] = [];
  const inAzure = local._inAzure ?? {};
  const azureNames = new Set(Object.values(connectionPairs));
  for (const name of appSettingNames) {
    if (name in connectionPairs) {
      if (!(name in local.Values))
        problems.push(`${name} (connection string) missing from local.settings.sample.json Values`);
      if (bicep.has(name))
        problems.push(`${name} is set in Bicep; Azure must use ${connectionPairs[name]} (identity)`);
      if (!appSettingNames.includes(connectionPairs[name]))
        problems.push(`settingNames lacks the Azure form ${connectionPairs[name]} of ${name}`);
    } else if (azureNames.has(name) || name.includes('__')) {
      if (!(name in inAzure)) problems.push(`${name} missing from local.settings.sample.json _inAzure`);
      if (!bicep.has(name)) problems.push(`${name} missing from the Bicep app settings`);
    } else {
      if (!(name in local.Values)) problems.push(`${name} missing from local.settings.sample.json Values`);
      if (!bicep.has(name)) problems.push(`${name} missing from the Bicep app settings`);
    }
  }
  for (const [name, expected] of Object.entries(identitySettings)) {
    const value = bicep.get(name);
    if (value === undefined) problems.push(`identity setting ${name} missing from the Bicep app settings`);
    else if (typeof expected === 'string' ? value !== expected : !expected.test(value)) {
      problems.push(`identity setting ${name} has an unexpected value: ${value}`);
    }
  }
  for (const name of Object.keys(inAzure)) {
    if (name !== 'note' && !bicep.has(name))
      problems.push(`_inAzure lists ${name}, which Bicep does not set`);
  }
  for (const name of ['AzureWebJobsStorage', 'FUNCTIONS_WORKER_RUNTIME', 'FUNCTIONS_EXTENSION_VERSION']) {
    if (bicep.has(name))
      problems.push(`Bicep sets ${name}, which Flex Consumption with identity-based storage must not have`);
  }
  return problems;
}

/**
 * Secrets must not appear anywhere under infra/. The one connection string allowed is
 * Application Insights', read from the component: with DisableLocalAuth it only names the
 * ingestion endpoint and grants nothing.
 */
export function checkNoSecrets(files: BicepFile[]): string[] {
  const forbidden: [RegExp, string][] = [
    [/listKeys\s*\(/i, 'listKeys('],
    [/listConnectionStrings?\s*\(/i, 'listConnectionStrings('],
    [/AccountKey\s*=/i, 'AccountKey='],
    [/SharedAccessKey(Name)?\s*=/i, 'SharedAccessKey='],
    [/SharedAccessSignature/i, 'SharedAccessSignature'],
    [/\bsig=/i, 'a SAS signature'],
    [/primary(Key|ConnectionString)\b/i, 'primaryKey/primaryConnectionString'],
    [/authorizationRules/i, 'a SAS authorization rule'],
  ];
  const allowedConnectionString =
    /^\s*APPLICATIONINSIGHTS_CONNECTION_STRING:\s*\w+\.properties\.ConnectionString\s*$/;
  const problems: string[] = [];
  for (const f of files) {
    f.text.split('\n').forEach((line, i) => {
      for (const [re, what] of forbidden) {
        if (re.test(line)) problems.push(`${f.path}:${i + 1} contains ${what}`);
      }
      if (/connection_?string/i.test(line) && !allowedConnectionString.test(line)) {
        problems.push(`${f.path}:${i + 1} uses a connection string: ${line.trim()}`);
      }
    });
  }
  return problems;
}

/** Local (key/SAS) auth is off on every data service. */
export function checkLocalAuthDisabled(files: BicepFile[]): string[] {
  const problems: string[] = [];
  const one = (type: string) => {
    const decls = declared(files, type);
    if (decls.length !== 1) problems.push(`expected one ${type}, found ${decls.length}`);
    return decls[0]?.body ?? '';
  };
  const must = (body: string, type: string, re: RegExp, what: string) => {
    if (!re.test(body)) problems.push(`${type} does not set ${what}`);
  };
  const sb = one('Microsoft.ServiceBus/namespaces');
  must(sb, 'Service Bus namespace', /\n\s*disableLocalAuth:\s*true\b/, 'disableLocalAuth: true');
  must(sb, 'Service Bus namespace', /\n\s*name:\s*'Standard'/, "sku name 'Standard'");
  const st = one('Microsoft.Storage/storageAccounts');
  must(st, 'storage account', /\n\s*allowSharedKeyAccess:\s*false\b/, 'allowSharedKeyAccess: false');
  must(st, 'storage account', /\n\s*allowBlobPublicAccess:\s*false\b/, 'allowBlobPublicAccess: false');
  must(st, 'storage account', /\n\s*minimumTlsVersion:\s*'TLS1_2'/, "minimumTlsVersion: 'TLS1_2'");
  const ai = one('Microsoft.Insights/components');
  must(ai, 'Application Insights', /\n\s*DisableLocalAuth:\s*true\b/, 'DisableLocalAuth: true');
  return problems;
}

/** Role ids checked against the Azure built-in roles reference (docs/deploy.md cites it). */
export const builtInRoles: Record<string, string> = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b',
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88',
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3',
  storageTableDataReader: '76199698-9eea-4c19-bc75-cec21354c6b6',
  storageQueueDataReader: '19e7f393-937e-4f77-808e-94535e297925',
  serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0',
  serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39',
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb',
};

/** Role assignments: deterministic guid() names, verified role ids, no namespace-wide scope. */
export function checkRbac(rbacBicep: BicepFile): string[] {
  const text = stripComments(rbacBicep.text);
  const problems: string[] = [];
  const rolesBlock = valueOf(text, 'roles') ?? '';
  const declaredRoles = new Map<string, string>();
  for (const m of rolesBlock.matchAll(/\n\s*(\w+):\s*'([0-9a-f-]+)'/g)) declaredRoles.set(m[1], m[2]);
  for (const [role, id] of declaredRoles) {
    if (builtInRoles[role] !== id)
      problems.push(
        `role ${role} = ${id} does not match the built-in role id ${builtInRoles[role] ?? '(unknown role)'}`,
      );
  }
  const assignments = resources(text).filter((r) => r.type === 'Microsoft.Authorization/roleAssignments');
  if (assignments.length === 0) problems.push('no role assignments declared');
  for (const a of assignments) {
    if (!/\n\s*name:\s*guid\(/.test(a.body)) problems.push(`${a.symbol}: name is not a guid(...)`);
    const scope = /\n\s*scope:\s*([^\n]+)/.exec(a.body)?.[1].trim() ?? '';
    if (/serviceBus/.test(a.body) && /^namespace\b/.test(scope))
      problems.push(`${a.symbol}: Service Bus role scoped to the whole namespace`);
    if (/Owner/.test(a.body) && /serviceBus/i.test(a.body))
      problems.push(`${a.symbol}: grants a Service Bus owner role`);
  }
  return problems;
}
