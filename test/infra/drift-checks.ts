/**
 * Checks that keep infra/ (Azure), infra/servicebus-emulator/Config.json (local Service Bus),
 * local.settings.sample.json and the app's own names in step. Each check takes texts and
 * returns the problems it found, so the tests can run it on the real files (expect none) and
 * on deliberately broken copies (expect the break to be reported).
 */
import { posix } from 'node:path';
import {
  matchingBracket,
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

/** A TypeScript source of the app, read as text (path relative to the repository root). */
export interface SourceFile {
  path: string;
  text: string;
}

/** The entity-name constants of shared/messaging/entities.ts, as the compiled module exports them. */
export interface EntityConstants {
  queues: Record<string, string>;
  topics: Record<string, string>;
  /**
   * The queues of the declared steps' Agents (shared/domain/orderWorkflow.ts): what a trigger
   * registered in a loop over the steps (`queueName: step.agentQueue`) listens on, and what the
   * Scheduler's dispatches (`agentQueue: def.agentQueue`) send to.
   */
  agentQueues?: readonly string[];
  /**
   * Every Agent's waiting queue (`waitingQueueOf(agentQueue)`): what an Agent pulls from with its
   * own receiver (`.pull(waitingQueueOf(`) and sends to (`.send(waitingQueueOf(`).
   */
  waitingQueues?: readonly string[];
}

/** What the app does on Service Bus, read from its sources. */
export interface AppMessaging {
  /** Queues an app.serviceBusQueue trigger listens on. */
  triggerQueues: string[];
  /** Queues the app receives from with its own receiver, no trigger (MessageBus.pull sources). */
  pulledQueues: string[];
  /** `topic/subscription` pairs an app.serviceBusTopic trigger listens on. */
  triggerSubscriptions: string[];
  /** Queues and topics the app sends to (MessageBus.send targets). */
  sendQueues: string[];
  sendTopics: string[];
}

/** Index just past the bracketed block that opens at `open`; skips '…', "…" and `…` strings. */
function blockEnd(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === "'" || c === '"' || c === '`') {
      i++;
      while (i < text.length && text[i] !== c) i += text[i] === '\\' ? 2 : 1;
    } else if (c === '{' || c === '(' || c === '[') depth++;
    else if (c === '}' || c === ')' || c === ']') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return text.length;
}

/** Whether `index` is in a // comment or on a line of a block comment (a doc comment's `*` line). */
function inComment(text: string, index: number): boolean {
  const line = text.slice(text.lastIndexOf('\n', index - 1) + 1, index);
  return line.includes('//') || /^\s*(\/\*|\*)/.test(line);
}

/** The value of `key:` in an options object: a string literal or a `queues.x` / `topics.x` constant. */
function resolveName(
  body: string,
  key: string,
  names: EntityConstants,
  where: string,
): { name?: string; problem?: string } {
  const m = new RegExp(`\\b${key}\\s*:\\s*([^,\\n}]+)`).exec(body);
  if (!m) return { problem: `${where} has no ${key}` };
  const expr = m[1].trim();
  const literal = /^(['"`])([^'"`]+)\1$/.exec(expr);
  if (literal) return { name: literal[2] };
  const constant = /^(queues|topics)\.(\w+)$/.exec(expr);
  const value = constant ? names[constant[1] as 'queues' | 'topics'][constant[2]] : undefined;
  if (value !== undefined) return { name: value };
  return {
    problem: `${where}: cannot resolve ${key} ${expr} (use a string or a shared/messaging/entities.ts constant)`,
  };
}

/**
 * The queues and subscriptions the app's Service Bus triggers listen on (functions/*.ts:
 * app.serviceBusQueue / app.serviceBusTopic), and the entities it sends to (any source:
 * `bus.send(queues.x`, `createSender(queues.x`, `entity: queues.x | topics.x`, `agent: queues.x` for the workflow's
 * dispatch targets). A trigger whose entity cannot be resolved is reported, not skipped.
 */
export function appMessaging(
  sources: SourceFile[],
  names: EntityConstants,
): { messaging: AppMessaging; problems: string[] } {
  const messaging: AppMessaging = {
    triggerQueues: [],
    pulledQueues: [],
    triggerSubscriptions: [],
    sendQueues: [],
    sendTopics: [],
  };
  const problems: string[] = [];
  const add = (list: string[], name: string) => {
    if (!list.includes(name)) list.push(name);
  };
  for (const f of sources) {
    // The name is a literal, or `agentKey(step.agent)` in the loop over the declared steps.
    for (const m of f.text.matchAll(
      /app\.serviceBus(Queue|Topic)\(\s*(?:(['"`])([^'"`]+)\2|(agentKey\(step\.agent\)))\s*,\s*\{/g,
    )) {
      const open = (m.index ?? 0) + m[0].length - 1;
      const body = f.text.slice(open, blockEnd(f.text, open));
      const where = `${f.path}: trigger ${m[3] ?? m[4]}`;
      if (m[1] === 'Queue' && /\bqueueName\s*:\s*step\.agentQueue\b/.test(body)) {
        if (!names.agentQueues)
          problems.push(`${where}: listens on the declared Agent queues, but none were given`);
        for (const q of names.agentQueues ?? []) add(messaging.triggerQueues, q);
      } else if (m[1] === 'Queue') {
        const q = resolveName(body, 'queueName', names, where);
        if (q.problem) problems.push(q.problem);
        else add(messaging.triggerQueues, q.name!);
      } else {
        const t = resolveName(body, 'topicName', names, where);
        const s = resolveName(body, 'subscriptionName', names, where);
        for (const r of [t, s]) if (r.problem) problems.push(r.problem);
        if (t.name && s.name) add(messaging.triggerSubscriptions, `${t.name}/${s.name}`);
      }
    }
    if (/\bagentQueue:\s*def\.agentQueue\b/.test(f.text)) {
      for (const q of names.agentQueues ?? []) add(messaging.sendQueues, q);
    }
    // An Agent's waiting queue is named from its own queue, so the call covers every Agent's.
    for (const m of f.text.matchAll(/\.(pull|send)(?:!|\?\.)?\(\s*waitingQueueOf\(/g)) {
      if (inComment(f.text, m.index ?? 0)) continue;
      if (!names.waitingQueues)
        problems.push(
          `${f.path}: ${m[1] === 'pull' ? 'pulls from' : 'sends to'} the Agents' waiting queues, but none were given`,
        );
      const list = m[1] === 'pull' ? messaging.pulledQueues : messaging.sendQueues;
      for (const q of names.waitingQueues ?? []) add(list, q);
    }
    for (const m of f.text.matchAll(/\.pull(?:!|\?\.)?\(\s*([^,)]*)/g)) {
      const expr = m[1].trim();
      if (expr.startsWith('waitingQueueOf(') || inComment(f.text, m.index ?? 0)) continue;
      const constant = /^queues\.(\w+)$/.exec(expr);
      const value = constant ? names.queues[constant[1]] : undefined;
      if (value !== undefined) add(messaging.pulledQueues, value);
      else
        problems.push(
          `${f.path}: cannot resolve the queue of .pull(${expr}) (use waitingQueueOf(...) or a queues.x constant)`,
        );
    }
    for (const m of f.text.matchAll(
      /(?:\.send\(|\.createSender\(|\bentity:|\bagent:)\s*(queues|topics)\.(\w+)/g,
    )) {
      const value = names[m[1] as 'queues' | 'topics'][m[2]];
      if (value === undefined) problems.push(`${f.path}: sends to unknown constant ${m[1]}.${m[2]}`);
      else add(m[1] === 'queues' ? messaging.sendQueues : messaging.sendTopics, value);
    }
  }
  return { messaging, problems };
}

/**
 * Entity names the Bicep names by hand (for RBAC scopes and alerts) live in one `appEntities`
 * block in main.bicep. Each must exist in Config.json. Data Receiver (receivesFromQueues) must
 * be granted on exactly the queues the app receives from, by a trigger or with its own receiver
 * (`.pull`): a missing one fails the trigger's or the receiver's authorisation in Azure, an extra
 * one is more than least privilege. Data Sender (sendsToQueues, sendsToTopics) must cover every
 * entity the app sends to. The app listens on no topic subscription today (order-status/all is
 * for client apps); a topic trigger would need a `receivesFromSubscriptions` entry.
 */
export function checkAppEntities(mainBicep: string, config: EmulatorConfig, app: AppMessaging): string[] {
  const block = valueOf(stripComments(mainBicep), 'appEntities');
  if (!block) return ['main.bicep has no appEntities block'];
  const known = entityNames(config);
  const problems: string[] = [];
  for (const name of stringLiterals(block)) {
    if (!known.queues.includes(name) && !known.topics.includes(name) && !known.subscriptions.includes(name)) {
      problems.push(`main.bicep appEntities names ${name}, which Config.json does not declare`);
    }
  }
  const list = (key: string) => stringLiterals(valueOf(block, key) ?? '');
  const receives = list('receivesFromQueues');
  const receivesSubs = list('receivesFromSubscriptions');
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
  for (const s of receivesSubs) {
    if (!known.subscriptions.includes(s))
      problems.push(
        `appEntities uses ${s} as a subscription, but it is not a Config.json topic/subscription`,
      );
  }
  for (const q of app.triggerQueues) {
    if (!receives.includes(q))
      problems.push(
        `a trigger listens on queue ${q}, but receivesFromQueues lacks it (no Data Receiver role)`,
      );
  }
  for (const q of app.pulledQueues) {
    if (!receives.includes(q))
      problems.push(
        `the app pulls from queue ${q} with its own receiver, but receivesFromQueues lacks it (no Data Receiver role)`,
      );
  }
  for (const q of receives) {
    if (!app.triggerQueues.includes(q) && !app.pulledQueues.includes(q))
      problems.push(
        `receivesFromQueues grants Data Receiver on ${q}, but no trigger listens on it and the app pulls nothing from it`,
      );
  }
  for (const s of app.triggerSubscriptions) {
    if (!receivesSubs.includes(s))
      problems.push(`a trigger listens on subscription ${s}, but receivesFromSubscriptions lacks it`);
  }
  for (const s of receivesSubs) {
    if (!app.triggerSubscriptions.includes(s))
      problems.push(`receivesFromSubscriptions grants Data Receiver on ${s}, but no trigger listens on it`);
  }
  // Each non-empty list must reach a module (rbac.bicep) as `key: appEntities.key`.
  const text = stripComments(mainBicep);
  for (const [key, values] of Object.entries({
    receivesFromQueues: receives,
    receivesFromSubscriptions: receivesSubs,
    sendsToQueues: sendsQ,
    sendsToTopics: sendsT,
  })) {
    if (values.length > 0 && !new RegExp(`\\n\\s*${key}:\\s*appEntities\\.${key}\\s*\\n`).test(text))
      problems.push(`appEntities.${key} is not passed to any module (no role is granted from it)`);
  }
  for (const q of app.sendQueues) {
    if (!sendsQ.includes(q))
      problems.push(`the app sends to queue ${q}, but sendsToQueues lacks it (no Data Sender role)`);
  }
  for (const t of app.sendTopics) {
    if (!sendsT.includes(t))
      problems.push(`the app sends to topic ${t}, but sendsToTopics lacks it (no Data Sender role)`);
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
    // Application Insights: ingestion is Entra-only, so no setting may carry the key itself.
    [/InstrumentationKey\s*=/i, 'an Application Insights instrumentation key'],
    [/APPINSIGHTS_INSTRUMENTATIONKEY/i, 'APPINSIGHTS_INSTRUMENTATIONKEY'],
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

/**
 * Local (key/SAS) auth is off on every data service: every Service Bus namespace declared under
 * infra/ (the app's and the conformance one) is Standard with SAS disabled; the one storage
 * account, Application Insights component and Log Analytics workspace reject keys.
 */
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
  const namespaces = declared(files, 'Microsoft.ServiceBus/namespaces');
  if (namespaces.length === 0) problems.push('no Service Bus namespace declared');
  for (const ns of namespaces) {
    const what = `Service Bus namespace ${ns.file}:${ns.symbol}`;
    must(ns.body, what, /\n\s*disableLocalAuth:\s*true\b/, 'disableLocalAuth: true');
    must(ns.body, what, /\n\s*name:\s*'Standard'/, "sku name 'Standard'");
  }
  // The main account and the state store's further accounts (order-storage.bicep) alike.
  const accounts = declared(files, 'Microsoft.Storage/storageAccounts');
  if (accounts.length === 0) problems.push('no Microsoft.Storage/storageAccounts declared');
  for (const account of accounts) {
    const st = account.body;
    const what = `storage account ${account.file}:${account.symbol}`;
    must(st, what, /\n\s*allowSharedKeyAccess:\s*false\b/, 'allowSharedKeyAccess: false');
    must(st, what, /\n\s*allowBlobPublicAccess:\s*false\b/, 'allowBlobPublicAccess: false');
    must(st, what, /\n\s*minimumTlsVersion:\s*'TLS1_2'/, "minimumTlsVersion: 'TLS1_2'");
  }
  const ai = one('Microsoft.Insights/components');
  must(ai, 'Application Insights', /\n\s*DisableLocalAuth:\s*true\b/, 'DisableLocalAuth: true');
  const la = one('Microsoft.OperationalInsights/workspaces');
  must(
    la,
    'Log Analytics workspace',
    /\n\s*features:\s*\{[^}]*\n\s*disableLocalAuth:\s*true\b/,
    'features.disableLocalAuth: true',
  );
  return problems;
}

/**
 * Role assignments: deterministic guid() names, no namespace-wide Service Bus scope, no owner
 * role, and every role id in the file's `roles` table equal to `expected` (role key → built-in
 * role definition id, which the caller takes from the Azure built-in roles reference, not from
 * the Bicep). A key the caller does not know is reported too.
 */
export function checkRbac(file: BicepFile, expected: Record<string, string>): string[] {
  const text = stripComments(file.text);
  const problems: string[] = [];
  const rolesBlock = valueOf(text, 'roles');
  if (!rolesBlock) problems.push(`${file.path} has no roles table`);
  const declaredRoles = new Map<string, string>();
  for (const m of (rolesBlock ?? '').matchAll(/\n\s*(\w+):\s*'([^']*)'/g)) declaredRoles.set(m[1], m[2]);
  for (const [role, id] of declaredRoles) {
    if (!(role in expected))
      problems.push(`${file.path}: role ${role} = ${id} is not a verified built-in role`);
    else if (expected[role] !== id)
      problems.push(`${file.path}: role ${role} = ${id}, but the built-in role's id is ${expected[role]}`);
  }
  // A role id written inline, outside the table, would escape the check.
  const outside = text.replace(rolesBlock ?? '', '');
  for (const m of outside.matchAll(/'([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})'/gi)) {
    problems.push(`${file.path}: role id ${m[1]} written outside the roles table`);
  }
  const assignments = resources(text).filter((r) => r.type === 'Microsoft.Authorization/roleAssignments');
  if (assignments.length === 0) problems.push(`${file.path}: no role assignments declared`);
  for (const a of assignments) {
    if (!/\n\s*name:\s*guid\(/.test(a.body)) problems.push(`${a.symbol}: name is not a guid(...)`);
    const scope = /\n\s*scope:\s*([^\n]+)/.exec(a.body)?.[1].trim() ?? '';
    if (/serviceBus/.test(a.body) && /^(namespace|newNamespace)\b/.test(scope))
      problems.push(`${a.symbol}: Service Bus role scoped to the whole namespace`);
    if (/Owner/.test(a.body) && /serviceBus/i.test(a.body))
      problems.push(`${a.symbol}: grants a Service Bus owner role`);
    const roleRef = /roleDefinitionId:[^\n]*\b(?:roles\.(\w+)|roleId)\b/.exec(a.body);
    if (!roleRef) problems.push(`${a.symbol}: roleDefinitionId does not come from the roles table`);
  }
  return problems;
}

/** Config.json correlation-filter key → ARM correlationFilter property (Subject: the emulator's alias of Label). */
export const correlationFilterMap: Record<string, string> = {
  ContentType: 'contentType',
  CorrelationId: 'correlationId',
  Label: 'label',
  Subject: 'label',
  MessageId: 'messageId',
  Properties: 'properties',
  ReplyTo: 'replyTo',
  ReplyToSessionId: 'replyToSessionId',
  SessionId: 'sessionId',
  To: 'to',
};

interface EmulatorRule {
  Name: string;
  Properties?: {
    FilterType?: string;
    CorrelationFilter?: Record<string, unknown>;
    SqlFilter?: { SqlExpression?: string };
    Action?: { SqlExpression?: string };
  };
}

/** Every rule of every subscription, as topic/subscription/rule. */
export function emulatorRules(config: EmulatorConfig): { path: string; rule: EmulatorRule }[] {
  const ns = emulatorNamespace(config);
  return (ns.Topics ?? []).flatMap((t) =>
    (t.Subscriptions ?? []).flatMap((s) =>
      ((s as { Rules?: EmulatorRule[] }).Rules ?? []).map((rule) => ({
        path: `${t.Name}/${s.Name}/${rule.Name}`,
        rule,
      })),
    ),
  );
}

/**
 * Subscription rules in Bicep are exactly Config.json's: one rules resource looping over a list
 * flattened from each subscription's Rules, named topic/subscription/rule, with filterType
 * 'CorrelationFilter' for FilterType 'Correlation' ('SqlFilter' for 'Sql') and every
 * correlation-filter key Config.json uses mapped to its ARM property. Values ARM cannot take
 * (a non-string user property) or keys it has no property for are reported.
 */
export function checkRulesFromConfig(files: BicepFile[], config: EmulatorConfig): string[] {
  const rules = emulatorRules(config);
  const problems: string[] = [];
  for (const { path, rule } of rules) {
    const type = rule.Properties?.FilterType;
    if (type === 'Correlation') {
      const filter = rule.Properties?.CorrelationFilter ?? {};
      if (Object.keys(filter).length === 0) problems.push(`rule ${path}: empty CorrelationFilter`);
      for (const [key, value] of Object.entries(filter)) {
        if (!correlationFilterMap[key])
          problems.push(`rule ${path}: CorrelationFilter.${key} has no ARM mapping`);
        else if (key === 'Properties') {
          for (const [p, v] of Object.entries((value ?? {}) as Record<string, unknown>)) {
            if (typeof v !== 'string')
              problems.push(
                `rule ${path}: user property ${p} is ${typeof v}; ARM correlationFilter.properties takes strings only`,
              );
          }
        } else if (typeof value !== 'string')
          problems.push(`rule ${path}: CorrelationFilter.${key} must be a string`);
      }
    } else if (type === 'Sql') {
      if (!rule.Properties?.SqlFilter?.SqlExpression)
        problems.push(`rule ${path}: Sql filter without SqlExpression`);
    } else problems.push(`rule ${path}: FilterType ${String(type)} is neither Correlation nor Sql`);
  }

  const decls = declared(files, 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules');
  if (decls.length !== 1) {
    problems.push(
      `expected one rules resource (a loop over Config.json subscription rules), found ${decls.length}${rules.length ? ` while Config.json declares ${rules.length} rule(s)` : ''}`,
    );
    return problems;
  }
  const [decl] = decls;
  const file = stripComments(files.find((f) => f.path === decl.file)?.text ?? '');
  const source = decl.loop?.source ?? '';
  const v = decl.loop?.variable ?? '';
  // The loop's list: flatten(map(<subscriptions>, s => map(s.Rules, r => {...}))), where the
  // subscriptions list itself carries each Config.json subscription's Rules.
  const listDef = new RegExp(
    `\\bvar\\s+${source}\\s*=\\s*flatten\\(\\s*map\\(\\s*(\\w+)\\s*,\\s*(\\w+)\\s*=>\\s*map\\(\\s*\\2\\.Rules\\s*,`,
  ).exec(file);
  if (!decl.loop || !listDef) {
    problems.push(`${decl.file}:${decl.symbol} does not loop over rules flattened from subscription Rules`);
  } else {
    const subsDef = valueOfVar(file, listDef[1]);
    if (!/\n\s*Rules:\s*\w+\.\??Rules\b/.test(subsDef))
      problems.push(`${listDef[1]} does not carry each Config.json subscription's Rules`);
  }
  const body = decl.body;
  if (
    !new RegExp(
      `\\n\\s*name:\\s*'\\$\\{\\w+\\.name\\}/\\$\\{${v}\\.topicName\\}/\\$\\{${v}\\.subscriptionName\\}/\\$\\{${v}\\.Name\\}'`,
    ).test(body)
  )
    problems.push(`${decl.symbol}: name is not topic/subscription/${v}.Name`);
  if (
    !new RegExp(
      `\\n\\s*filterType:\\s*${v}\\.Properties\\.FilterType\\s*==\\s*'Correlation'\\s*\\?\\s*'CorrelationFilter'\\s*:\\s*'SqlFilter'`,
    ).test(body)
  )
    problems.push(
      `${decl.symbol}: filterType is not 'CorrelationFilter' for Correlation and 'SqlFilter' for Sql`,
    );
  if (
    !new RegExp(
      `\\n\\s*correlationFilter:\\s*${v}\\.Properties\\.FilterType\\s*!=\\s*'Correlation'\\s*\\?\\s*null\\s*:`,
    ).test(body)
  )
    problems.push(`${decl.symbol}: correlationFilter is not set (only) for Correlation rules`);
  const usedKeys = new Set(
    rules
      .flatMap(({ rule }) => Object.keys(rule.Properties?.CorrelationFilter ?? {}))
      .concat(Object.keys(correlationFilterMap)),
  );
  for (const key of usedKeys) {
    const arm = correlationFilterMap[key];
    if (!arm) continue;
    const line = new RegExp(`\\n\\s*${arm}:[^\\n]*${v}\\.Properties\\.\\??CorrelationFilter\\.\\??${key}\\b`);
    if (!line.test(body))
      problems.push(`${decl.symbol}: correlationFilter.${arm} is not set from CorrelationFilter.${key}`);
  }
  if (
    !new RegExp(`\\n\\s*sqlExpression:[^\\n]*${v}\\.Properties\\.\\??SqlFilter\\.\\??SqlExpression\\b`).test(
      body,
    )
  )
    problems.push(`${decl.symbol}: sqlFilter.sqlExpression is not set from SqlFilter.SqlExpression`);
  if (
    !new RegExp(`\\n\\s*sqlExpression:[^\\n]*${v}\\.Properties\\.\\??Action\\.\\??SqlExpression\\b`).test(
      body,
    )
  )
    problems.push(`${decl.symbol}: action.sqlExpression is not set from Action.SqlExpression`);
  return problems;
}

/** The text of `var name = ...` up to the next top-level declaration. */
function valueOfVar(text: string, name: string): string {
  const m = new RegExp(`\\bvar\\s+${name}\\s*=`).exec(text);
  if (!m) return '';
  const rest = text.slice(m.index + m[0].length);
  const next = /\n(?:var|param|resource|module|output)\s/.exec(rest);
  return rest.slice(0, next ? next.index : undefined);
}

/**
 * A Bicep file that loads a Config.json hands that file's one namespace to the shared entities
 * module (so every entity in it is created by the same, checked mapping).
 */
export function checkPassesEntitiesToModule(file: BicepFile, modulePath: string): string[] {
  const text = stripComments(file.text);
  const m = /\bmodule\s+\w+\s+'([^']+)'\s*=\s*\{/.exec(text);
  if (!m) return [`${file.path} uses no module for its Service Bus entities`];
  const resolved = posix.normalize(posix.join(posix.dirname(file.path), m[1]));
  const problems: string[] = [];
  if (resolved !== modulePath) problems.push(`${file.path} uses module ${resolved}, not ${modulePath}`);
  const open = (m.index ?? 0) + m[0].length - 1;
  const body = text.slice(open, matchingBracket(text, open) + 1);
  if (!/\n\s*entities:\s*\w+\.UserConfig\.Namespaces\[0\]\s*\n/.test(body))
    problems.push(
      `${file.path}: the module's entities are not the loaded Config.json's UserConfig.Namespaces[0]`,
    );
  return problems;
}

export interface OperatorAuthFiles {
  apiBicep: string;
  mainBicep: string;
  parametersJson: string;
  azureYaml: string;
  rolesJson: string;
  preprovision: string;
  /** The app role the app checks (shared/http/operatorAuth.ts). */
  role: string;
}

/**
 * Operator sign-in in Azure: App Service Authentication (authsettingsV2) with Entra ID that lets
 * unauthenticated requests through (clients use function keys), fed the client id the azd
 * preprovision hook creates, whose app role is the one the app checks.
 */
export function checkOperatorAuth(f: OperatorAuthFiles): string[] {
  const problems: string[] = [];
  const api = stripComments(f.apiBicep);
  const head = /resource\s+(\w+)\s+'config'\s*=\s*if\s*\(\s*!empty\(operatorAuthClientId\)\s*\)\s*\{/.exec(
    api,
  );
  if (!head) {
    problems.push("api.bicep: no 'config' child resource conditional on operatorAuthClientId");
  } else {
    const open = head.index + head[0].length - 1;
    const body = api.slice(open, matchingBracket(api, open) + 1);
    const expect = (pattern: RegExp, what: string) => {
      if (!pattern.test(body)) problems.push(`api.bicep auth settings: ${what}`);
    };
    expect(/name:\s*'authsettingsV2'/, "name is not 'authsettingsV2'");
    expect(/platform:\s*\{\s*enabled:\s*true\s*\}/, 'platform.enabled is not true');
    expect(/requireAuthentication:\s*false/, 'requireAuthentication must be false (clients use keys)');
    expect(
      /unauthenticatedClientAction:\s*'AllowAnonymous'/,
      "unauthenticatedClientAction is not 'AllowAnonymous'",
    );
    expect(/azureActiveDirectory:\s*\{\s*enabled:\s*true/, 'Entra ID (azureActiveDirectory) is not enabled');
    expect(
      /clientId:\s*operatorAuthClientId\b/,
      'the Entra registration clientId is not operatorAuthClientId',
    );
    expect(
      /openIdIssuer:\s*'\$\{environment\(\)\.authentication\.loginEndpoint\}\$\{tenant\(\)\.tenantId\}\/v2\.0'/,
      'openIdIssuer is not the tenant v2.0 issuer',
    );
    expect(
      /allowedAudiences:\s*\[[^\]]*'api:\/\/\$\{operatorAuthClientId\}'/,
      'allowedAudiences lacks api://<client id>',
    );
  }
  if (!/^param operatorAuthClientId string = ''/m.test(api))
    problems.push("api.bicep: param operatorAuthClientId string = '' is missing");
  const main = stripComments(f.mainBicep);
  if (!/^param operatorAuthClientId string/m.test(main))
    problems.push('main.bicep: param operatorAuthClientId is missing');
  if (!/module api 'app\/api\.bicep'[\s\S]*?operatorAuthClientId:\s*operatorAuthClientId/.test(main))
    problems.push('main.bicep: the api module is not given operatorAuthClientId');
  const params = JSON.parse(f.parametersJson) as { parameters: Record<string, { value?: unknown }> };
  if (params.parameters.operatorAuthClientId?.value !== '${OPERATOR_AUTH_CLIENT_ID}')
    problems.push('main.parameters.json: operatorAuthClientId is not ${OPERATOR_AUTH_CLIENT_ID}');

  const roles = JSON.parse(f.rolesJson) as Array<{
    value?: string;
    id?: string;
    allowedMemberTypes?: string[];
    isEnabled?: boolean;
  }>;
  const role = roles.find((r) => r.value === f.role);
  if (!role) problems.push(`operator-app-roles.json: no app role with value "${f.role}"`);
  else {
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(role.id ?? ''))
      problems.push('operator-app-roles.json: the role id is not a GUID');
    if (!role.allowedMemberTypes?.includes('User'))
      problems.push('operator-app-roles.json: users cannot hold the role');
    if (role.isEnabled !== true) problems.push('operator-app-roles.json: the role is not enabled');
  }
  for (const [hook, file] of [
    ['preprovision', './infra/hooks/preprovision.sh'],
    ['postprovision', './infra/hooks/postprovision.sh'],
  ]) {
    const re = new RegExp(
      `^  ${hook}:\\s*\\n\\s+posix:\\s*\\n\\s+shell: sh\\s*\\n\\s+run: ${file.replace(/\./g, '\\.')}\\s*$`,
      'm',
    );
    if (!re.test(f.azureYaml)) problems.push(`azure.yaml: the ${hook} hook does not run ${file}`);
  }
  if (!/--app-roles "@\$roles"/.test(f.preprovision) || !/operator-app-roles\.json/.test(f.preprovision))
    problems.push('preprovision.sh: does not create the registration with operator-app-roles.json');
  if (!/azd env set OPERATOR_AUTH_CLIENT_ID "\$app_id"/.test(f.preprovision))
    problems.push('preprovision.sh: does not store OPERATOR_AUTH_CLIENT_ID');
  return problems;
}

/**
 * The operator's dead-letter routes read every dead-letter source the app declares (each queue
 * and each order-status subscription), so main.bicep's appEntities must list exactly those in
 * readsDeadLettersOfQueues / readsDeadLettersOfSubscriptions, pass both to rbac.bicep, and
 * rbac.bicep must grant Data Receiver scoped to each (a queue the app already receives from
 * keeps its one assignment). A source missing here answers 401 from Service Bus in Azure.
 */
export function checkDeadLetterAccess(
  mainBicep: string,
  rbacBicep: string,
  sources: { queues: readonly string[]; subscriptions: readonly string[] },
): string[] {
  const block = valueOf(stripComments(mainBicep), 'appEntities');
  if (!block) return ['main.bicep has no appEntities block'];
  const problems: string[] = [];
  const list = (key: string) => stringLiterals(valueOf(block, key) ?? '').sort();
  const same = (a: readonly string[], b: readonly string[]) =>
    JSON.stringify(a) === JSON.stringify([...b].sort());
  if (!same(list('readsDeadLettersOfQueues'), sources.queues))
    problems.push(
      `readsDeadLettersOfQueues is ${JSON.stringify(list('readsDeadLettersOfQueues'))}, the app's dead-letter queues are ${JSON.stringify([...sources.queues].sort())}`,
    );
  if (!same(list('readsDeadLettersOfSubscriptions'), sources.subscriptions))
    problems.push(
      `readsDeadLettersOfSubscriptions is ${JSON.stringify(list('readsDeadLettersOfSubscriptions'))}, the app's dead-letter subscriptions are ${JSON.stringify([...sources.subscriptions].sort())}`,
    );
  const text = stripComments(mainBicep);
  for (const key of ['readsDeadLettersOfQueues', 'readsDeadLettersOfSubscriptions']) {
    if (!new RegExp(`\\n\\s*${key}:\\s*appEntities\\.${key}\\s*\\n`).test(text))
      problems.push(`appEntities.${key} is not passed to rbac.bicep (no role is granted from it)`);
  }
  const rbac = stripComments(rbacBicep);
  const assignments = resources(rbac).filter((r) => r.type === 'Microsoft.Authorization/roleAssignments');
  const grants = (source: string) =>
    assignments.some(
      (a) =>
        a.loop?.source === source &&
        /roles\.serviceBusDataReceiver/.test(a.body) &&
        /scope:\s*deadLetter\w+\[i\]/.test(a.body),
    );
  if (
    !/filter\(readsDeadLettersOfQueues,[^)]*!contains\(receivesFromQueues/.test(rbac) ||
    !grants('deadLetterOnlyQueues')
  )
    problems.push('rbac.bicep grants no Data Receiver on the dead-letter queues not already received from');
  if (!grants('readsDeadLettersOfSubscriptions'))
    problems.push('rbac.bicep grants no Data Receiver on the dead-letter subscriptions');
  return problems;
}

/** What a declared step's Agent needs outside the app's code, by name. */
export interface DeclaredAgent {
  step: string;
  agent: string;
  /** Its Service Bus queue (agent-{agent}). */
  queue: string;
  /** The queue its requests wait in for a call slot (agent-{agent}-waiting), if it has one. */
  waitingQueue?: string;
  /** Its service URL app setting ({AGENT}_SERVICE_URL). */
  urlSetting: string;
  /** The Bicep parameter carrying that URL ({agent}ServiceUrl). */
  urlParam: string;
}

export interface DeploymentFiles {
  config: EmulatorConfig;
  mainBicep: string;
  apiBicep: string;
  parameters: { parameters: Record<string, { value?: unknown }> };
  local: LocalSettings;
}

function listIn(block: string, key: string): string[] {
  const m = new RegExp(`\\b${key}\\s*:\\s*\\[([^\\]]*)\\]`).exec(block);
  return m ? [...m[1].matchAll(/'([^']*)'/g)].map((x) => x[1]) : [];
}

/**
 * Every declared step's Agent has its queue (Config.json, hence Bicep; Data Receiver and Sender
 * in main.bicep) and its service URL setting (main.bicep parameter, main.parameters.json, api.bicep
 * app setting, local.settings.sample.json); no Agent queue is left over from a removed step. Each
 * problem says what to add, and where, for a new step.
 */
export function checkDeclaredSteps(agents: readonly DeclaredAgent[], files: DeploymentFiles): string[] {
  const problems: string[] = [];
  const queues = (emulatorNamespace(files.config).Queues ?? []).map((q) => q.Name);
  const main = stripComments(files.mainBicep);
  const api = stripComments(files.apiBicep);
  const entities = valueOf(main, 'appEntities') ?? '';
  const receives = listIn(entities, 'receivesFromQueues');
  const sends = listIn(entities, 'sendsToQueues');
  const example = agents.find((a) => queues.includes(a.queue))?.queue;
  const waitingExample = agents.find((a) => a.waitingQueue && queues.includes(a.waitingQueue))?.waitingQueue;
  for (const a of agents) {
    const which = `step ${a.step} (Agent ${a.agent})`;
    // Its queue, then its waiting queue: each declared, received from and sent to.
    for (const [queue, like] of [
      [a.queue, example],
      [a.waitingQueue, waitingExample],
    ]) {
      if (queue === undefined) continue;
      if (!queues.includes(queue)) {
        problems.push(
          `${which}: add queue ${queue} to infra/servicebus-emulator/Config.json` +
            (like ? ` (copy the Properties of ${like})` : ''),
        );
      }
      if (!receives.includes(queue))
        problems.push(`${which}: add '${queue}' to appEntities.receivesFromQueues in infra/main.bicep`);
      if (!sends.includes(queue))
        problems.push(`${which}: add '${queue}' to appEntities.sendsToQueues in infra/main.bicep`);
    }
    if (!new RegExp(`^param ${a.urlParam} string\\b`, 'm').test(main))
      problems.push(`${which}: add \`param ${a.urlParam} string\` to infra/main.bicep`);
    if (!new RegExp(`\\n\\s*${a.urlParam}:\\s*${a.urlParam}\\b`).test(main))
      problems.push(`${which}: pass \`${a.urlParam}: ${a.urlParam}\` to the api module in infra/main.bicep`);
    if (!new RegExp(`^param ${a.urlParam} string\\b`, 'm').test(api))
      problems.push(`${which}: add \`param ${a.urlParam} string\` to infra/app/api.bicep`);
    const setting = bicepAppSettings(files.apiBicep).get(a.urlSetting);
    if (setting !== a.urlParam)
      problems.push(`${which}: add \`${a.urlSetting}: ${a.urlParam}\` to appSettings in infra/app/api.bicep`);
    const param = files.parameters.parameters[a.urlParam];
    if (param?.value !== `\${${a.urlSetting}}`) {
      problems.push(
        `${which}: add "${a.urlParam}": { "value": "\${${a.urlSetting}}" } to infra/main.parameters.json`,
      );
    }
    if (!(a.urlSetting in files.local.Values))
      problems.push(`${which}: add ${a.urlSetting} to local.settings.sample.json Values`);
  }
  const declaredQueues = new Set(
    agents.flatMap((a) => (a.waitingQueue ? [a.queue, a.waitingQueue] : [a.queue])),
  );
  for (const q of queues) {
    if (q.startsWith('agent-') && !declaredQueues.has(q))
      problems.push(`Config.json declares queue ${q}, but no declared step's Agent listens on it: remove it`);
  }
  return problems;
}
