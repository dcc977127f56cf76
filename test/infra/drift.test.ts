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
import { serviceUrlSetting, settingNames } from '../../shared/config/settings.js';
import {
  camelCase,
  orderStatusSubscriptions,
  queues as appQueues,
  topics as appTopics,
  waitingQueueOf,
  waitingQueues,
} from '../../shared/messaging/entities.js';
import { deadLetterSourceList } from '../../shared/messaging/deadLetters.js';
import { agentQueueName, orderWorkflow, type StepDeclaration } from '../../shared/domain/index.js';
import {
  appMessaging,
  bicepAppSettings,
  checkAppEntities,
  checkDeadLetterAccess,
  checkDeclaredSteps,
  checkEntitiesFromConfig,
  checkLoadsEmulatorConfig,
  checkLocalAuthDisabled,
  checkNoSecrets,
  checkPassesEntitiesToModule,
  checkRbac,
  checkRulesFromConfig,
  checkOperatorAuth,
  checkSettings,
  emulatorRules,
  entityNames,
  type BicepFile,
  type DeclaredAgent,
  type DeploymentFiles,
  type EmulatorConfig,
  type LocalSettings,
  type OperatorAuthFiles,
  type SourceFile,
} from './drift-checks.js';
import { operatorRole } from '../../shared/http/operatorAuth.js';
import { stringLiterals } from './bicep-text.js';

// Compiled to dist/test/infra; the sources live at the repository root.
const root = resolve(__dirname, '..', '..', '..');
const configPath = 'infra/servicebus-emulator/Config.json';
const fixturePath = 'emulators/servicebus/conformance/Config.json';
const entitiesModule = 'infra/app/servicebus-entities.bicep';

function read(path: string): string {
  return readFileSync(join(root, path), 'utf8');
}

function filesUnder(dir: string, ext?: string): BicepFile[] {
  const out: BicepFile[] = [];
  const walk = (abs: string) => {
    for (const name of readdirSync(abs)) {
      const full = join(abs, name);
      if (statSync(full).isDirectory()) walk(full);
      else if (!ext || name.endsWith(ext))
        out.push({ path: relative(root, full).split(sep).join('/'), text: readFileSync(full, 'utf8') });
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
const fixture = JSON.parse(read(fixturePath)) as EmulatorConfig;
const localSettings = JSON.parse(read('local.settings.sample.json')) as LocalSettings;
const appUses = { queues: [...Object.values(appQueues), ...waitingQueues], topics: Object.values(appTopics) };
/** The queues whose dead letters the operator's routes list (shared/messaging/deadLetters.ts). */
const deadLetterQueues = deadLetterSourceList.flatMap((s) => (s.kind === 'queue' ? [s.queue] : []));
// The app's own sources, read as text: its triggers (functions/) and its sends (shared/ too).
const appSources: SourceFile[] = [...filesUnder('functions', '.ts'), ...filesUnder('shared', '.ts')];
const declaredAgents = (steps: readonly StepDeclaration[]): DeclaredAgent[] =>
  steps.map((s) => ({
    step: s.name,
    agent: s.agent,
    queue: agentQueueName(s.agent),
    waitingQueue: waitingQueueOf(agentQueueName(s.agent)),
    urlSetting: serviceUrlSetting(s.agent),
    urlParam: `${camelCase(s.agent)}ServiceUrl`,
  }));
const entityConstants = {
  queues: appQueues,
  topics: appTopics,
  agentQueues: orderWorkflow.steps.map((s) => s.agentQueue),
  waitingQueues,
};
const app = appMessaging(appSources, entityConstants);

/**
 * Built-in role definition ids, copied by hand from Microsoft's Azure built-in roles reference
 * (https://learn.microsoft.com/azure/role-based-access-control/built-in-roles, sections Storage,
 * Integration and Monitor; MicrosoftDocs/azure-docs articles/role-based-access-control/
 * built-in-roles.md), NOT from infra/: a wrong id in a roles table must fail. Keyed by the name
 * the Bicep roles tables use; the comment is the role's official name.
 */
const builtInRoleIds: Record<string, string> = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b', // Storage Blob Data Owner
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe', // Storage Blob Data Contributor
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88', // Storage Queue Data Contributor
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3', // Storage Table Data Contributor
  storageTableDataReader: '76199698-9eea-4c19-bc75-cec21354c6b6', // Storage Table Data Reader
  storageQueueDataReader: '19e7f393-937e-4f77-808e-94535e297925', // Storage Queue Data Reader
  serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39', // Azure Service Bus Data Sender
  serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0', // Azure Service Bus Data Receiver
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb', // Monitoring Metrics Publisher
};

/** A copy of `file` with `from` replaced; fails if `from` is not there (a mutation must bite). */
function broken(file: BicepFile, from: string | RegExp, to: string): BicepFile {
  assert.ok(
    typeof from === 'string' ? file.text.includes(from) : from.test(file.text),
    `mutation target ${from} in ${file.path}`,
  );
  return { path: file.path, text: file.text.replace(from, to) };
}
/** A copy of main.bicep whose appEntities list `key` is `edit` of its names (written on one line). */
function withList(file: BicepFile, key: string, edit: (names: string[]) => string[]): BicepFile {
  const list = new RegExp(`(\\n\\s*${key}:\\s*)(\\[[^\\]]*\\])`);
  const m = list.exec(file.text);
  assert.ok(m, `${key} list in ${file.path}`);
  const names = edit(stringLiterals(m[2]));
  return broken(file, list, `$1[${names.map((n) => `'${n}'`).join(', ')}]`);
}
const without =
  (name: string) =>
  (names: string[]): string[] => {
    assert.ok(names.includes(name), `${name} is listed`);
    return names.filter((n) => n !== name);
  };
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

/** The operator's dead-letter routes list exactly these; an entity missing here would go unseen. */
test('the app names every Config.json queue and every order-status subscription (the dead-letter list)', () => {
  const known = entityNames(config);
  assert.deepEqual([...known.queues].sort(), [...deadLetterQueues].sort());
  const subscriptionsOf = (c: EmulatorConfig) =>
    entityNames(c)
      .subscriptions.filter((s) => s.startsWith(`${appTopics.orderStatus}/`))
      .map((s) => s.slice(appTopics.orderStatus.length + 1))
      .sort();
  assert.deepEqual(subscriptionsOf(config), [...orderStatusSubscriptions].sort());
  const extra = structuredClone(config);
  const topic = extra.UserConfig.Namespaces[0].Topics!.find((t) => t.Name === appTopics.orderStatus)!;
  topic.Subscriptions = [...(topic.Subscriptions ?? []), { Name: 'billing' }];
  assert.notDeepEqual(subscriptionsOf(extra), [...orderStatusSubscriptions].sort());
});

test('servicebus.bicep and conformance/main.bicep load their Config.json (loadJsonContent, path relative to the file)', () => {
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
  const conf = bicep('infra/conformance/main.bicep');
  assert.deepEqual(checkLoadsEmulatorConfig(conf, fixturePath), []);
  reports(
    checkLoadsEmulatorConfig(
      broken(
        conf,
        "'../../emulators/servicebus/conformance/Config.json'",
        "'../servicebus-emulator/Config.json'",
      ),
      fixturePath,
    ),
    /loads infra\/servicebus-emulator\/Config\.json, not emulators/,
  );
});

test('both hand their Config.json namespace to the one shared entities module', () => {
  for (const path of ['infra/app/servicebus.bicep', 'infra/conformance/main.bicep']) {
    const file = bicep(path);
    assert.deepEqual(checkPassesEntitiesToModule(file, entitiesModule), [], path);
    reports(
      checkPassesEntitiesToModule(
        broken(file, /\n\s*entities: \w+\.UserConfig\.Namespaces\[0\]/, '\n    entities: {}'),
        entitiesModule,
      ),
      /entities are not the loaded Config\.json/,
    );
    reports(
      checkPassesEntitiesToModule(
        broken(file, /'(?:\.\.\/app\/)?servicebus-entities\.bicep'/, "'./other.bicep'"),
        entitiesModule,
      ),
      /uses module .*other\.bicep, not infra\/app\/servicebus-entities\.bicep/,
    );
  }
});

test('Bicep declares exactly the Config.json queues, topics and subscriptions, every property mapped', () => {
  assert.deepEqual(checkEntitiesFromConfig(bicepFiles, config), []);
  // The same loops serve the conformance fixture, whose entities use the same properties.
  assert.deepEqual(checkEntitiesFromConfig(bicepFiles, fixture), []);
  const sb = bicep(entitiesModule);
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

/** A copy of the app's Config.json whose order-status/all subscription has `rules`. */
function withRules(rules: unknown[]): EmulatorConfig {
  const copy = structuredClone(config);
  const sub = copy.UserConfig.Namespaces[0].Topics![0].Subscriptions![0] as { Rules?: unknown[] };
  sub.Rules = rules;
  return copy;
}

test('subscription rules: each Config.json rule becomes a rules resource with the same name and filter', () => {
  // The app's Config.json has no rules today; the conformance fixture has correlation rules.
  assert.deepEqual(checkRulesFromConfig(bicepFiles, config), []);
  assert.ok(emulatorRules(fixture).length >= 2, 'the fixture declares rules');
  assert.deepEqual(checkRulesFromConfig(bicepFiles, fixture), []);

  const every = withRules([
    {
      Name: 'every-key',
      Properties: {
        FilterType: 'Correlation',
        CorrelationFilter: {
          ContentType: 'application/json',
          CorrelationId: 'c',
          Label: 'l',
          MessageId: 'm',
          ReplyTo: 'r',
          ReplyToSessionId: 'rs',
          SessionId: 's',
          To: 't',
          Properties: { region: 'eu' },
        },
      },
    },
    { Name: 'sql', Properties: { FilterType: 'Sql', SqlFilter: { SqlExpression: '1=1' } } },
  ]);
  assert.deepEqual(checkRulesFromConfig(bicepFiles, every), []);

  const sb = bicep(entitiesModule);
  const check = (file: BicepFile, cfg: EmulatorConfig) =>
    checkRulesFromConfig(withFile(bicepFiles, file), cfg);
  // A rule present in Config.json but not mapped in Bicep.
  reports(
    check(broken(sb, /\n\s*label: rule\.Properties[^\n]*/, ''), every),
    /correlationFilter\.label is not set from CorrelationFilter\.Label/,
  );
  reports(
    check(broken(sb, /\n\s*properties: rule\.Properties\.\?CorrelationFilter[^\n]*/, ''), every),
    /correlationFilter\.properties is not set from CorrelationFilter\.Properties/,
  );
  const noRules = broken(
    sb,
    "resource rules 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules@2024-01-01'",
    "resource rules 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01'",
  );
  reports(
    checkRulesFromConfig(withFile(bicepFiles, noRules), every),
    /expected one rules resource.*declares 2 rule/,
  );
  reports(
    check(broken(sb, "? 'CorrelationFilter' : 'SqlFilter'", "? 'SqlFilter' : 'CorrelationFilter'"), every),
    /filterType is not 'CorrelationFilter'/,
  );
  reports(
    check(broken(sb, '${rule.subscriptionName}/${rule.Name}', '${rule.Name}'), every),
    /name is not topic\/subscription\/rule\.Name/,
  );
  reports(
    check(broken(sb, 'map(subscription.Rules,', 'map([],'), every),
    /does not loop over rules flattened from subscription Rules/,
  );
  reports(
    check(broken(sb, /\n\s*Rules: subscription\.\?Rules[^\n]*/, ''), every),
    /does not carry each Config\.json subscription's Rules/,
  );
  // Config.json content ARM cannot express.
  reports(
    checkRulesFromConfig(
      bicepFiles,
      withRules([
        { Name: 'x', Properties: { FilterType: 'Correlation', CorrelationFilter: { Foo: 'bar' } } },
      ]),
    ),
    /CorrelationFilter\.Foo has no ARM mapping/,
  );
  reports(
    checkRulesFromConfig(
      bicepFiles,
      withRules([
        {
          Name: 'n',
          Properties: { FilterType: 'Correlation', CorrelationFilter: { Properties: { level: 3 } } },
        },
      ]),
    ),
    /user property level is number/,
  );
  reports(
    checkRulesFromConfig(bicepFiles, withRules([{ Name: 'b', Properties: { FilterType: 'Boolean' } }])),
    /FilterType Boolean is neither/,
  );
});

test("the app's Service Bus triggers and sends are read from its sources", () => {
  assert.deepEqual(app.problems, []);
  assert.deepEqual(
    [...app.messaging.triggerQueues].sort(),
    [appQueues.scheduler, ...orderWorkflow.steps.map((st) => st.agentQueue)].sort(),
  );
  assert.deepEqual(app.messaging.triggerSubscriptions, []);
  for (const q of [appQueues.scheduler, appQueues.operatorAlerts, appQueues.paymentAgent])
    assert.ok(app.messaging.sendQueues.includes(q), `the app sends to ${q}`);
  assert.deepEqual(app.messaging.sendTopics, [appTopics.orderStatus]);

  const fn: SourceFile = {
    path: 'functions/x.ts',
    text: "app.serviceBusQueue('x', {\n  connection: c,\n  queueName: someVariable,\n  handler: h,\n});\n",
  };
  reports(appMessaging([fn], entityConstants).problems, /cannot resolve queueName someVariable/);
  const topic: SourceFile = {
    path: 'functions/y.ts',
    text: "app.serviceBusTopic('y', { topicName: topics.orderStatus, subscriptionName: 'all', handler: h });",
  };
  assert.deepEqual(appMessaging([topic], entityConstants).messaging.triggerSubscriptions, [
    'order-status/all',
  ]);
});

/** An Agent that waits for a call slot in its waiting queue, as shared/agents/ does (issue 26). */
const waitingAgent: SourceFile = {
  path: 'shared/agents/waiting.ts',
  text: [
    'const next = await deps.bus.pull(waitingQueueOf(queueName), free, 0);',
    'await deps.bus.send(waitingQueueOf(queueName), [request]);',
  ].join('\n'),
};

test("an Agent's own receiver and sends on the waiting queues are read from its sources", () => {
  const read = appMessaging([waitingAgent], entityConstants);
  assert.deepEqual(read.problems, []);
  // Pulled with the app's own receiver, not a trigger: every Agent's waiting queue.
  assert.deepEqual(read.messaging.triggerQueues, []);
  assert.deepEqual(read.messaging.pulledQueues, [...waitingQueues]);
  assert.deepEqual(read.messaging.sendQueues, [...waitingQueues]);
  // MessageBus.pull is optional: called as pull!( or pull?.( as well.
  for (const call of ['pull!(', 'pull?.(']) {
    const asserted: SourceFile = { ...waitingAgent, text: waitingAgent.text.replace('pull(', call) };
    assert.deepEqual(
      appMessaging([asserted], entityConstants).messaging.pulledQueues,
      [...waitingQueues],
      call,
    );
  }
  const onlySends: SourceFile = { ...waitingAgent, text: waitingAgent.text.split('\n')[1]! };
  assert.deepEqual(appMessaging([onlySends], entityConstants).messaging.pulledQueues, []);
  // A pull from a named queue constant, and one the check cannot resolve.
  const named: SourceFile = { path: 'shared/x.ts', text: 'await bus.pull(queues.poison, 1, 0);' };
  assert.deepEqual(appMessaging([named], entityConstants).messaging.pulledQueues, [appQueues.poison]);
  const opaque: SourceFile = { path: 'shared/y.ts', text: 'await bus.pull(someQueue, 1, 0);' };
  // What a comment says is not a call.
  const documented: SourceFile = {
    path: 'shared/z.ts',
    text: '/**\n * `bus.pull(entity, max)` receives.\n */\n// then bus.pull(waitingQueueOf(q), 1, 0)\n',
  };
  assert.deepEqual(appMessaging([documented], entityConstants), {
    messaging: {
      triggerQueues: [],
      pulledQueues: [],
      triggerSubscriptions: [],
      sendQueues: [],
      sendTopics: [],
    },
    problems: [],
  });
  reports(
    appMessaging([opaque], entityConstants).problems,
    /shared\/y\.ts: cannot resolve the queue of \.pull\(someQueue/,
  );
  reports(
    appMessaging([waitingAgent], { queues: appQueues, topics: appTopics }).problems,
    /pulls from the Agents' waiting queues, but none were given/,
  );
});

test('main.bicep grants Data Receiver and Data Sender on every waiting queue an Agent pulls from and sends to', () => {
  const main = bicep('infra/main.bicep');
  // The app's sources as they are, plus an Agent that waits in its waiting queue.
  const withWaiting = appMessaging([...appSources, waitingAgent], entityConstants);
  assert.deepEqual(withWaiting.problems, []);
  const m = withWaiting.messaging;
  assert.deepEqual(checkAppEntities(main.text, config, m), []);
  for (const q of waitingQueues) {
    reports(
      checkAppEntities(withList(main, 'receivesFromQueues', without(q)).text, config, m),
      new RegExp(`the app pulls from queue ${q} with its own receiver, but receivesFromQueues lacks it`),
    );
    reports(
      checkAppEntities(withList(main, 'sendsToQueues', without(q)).text, config, m),
      new RegExp(`sends to queue ${q}, but sendsToQueues lacks it`),
    );
  }
  // Nothing pulls from them: a Data Receiver role on a waiting queue is more than least privilege.
  reports(
    checkAppEntities(main.text, config, { ...m, pulledQueues: [] }),
    /grants Data Receiver on agent-payment-waiting, but no trigger listens on it and the app pulls nothing from it/,
  );
});

test('main.bicep grants Data Receiver on exactly the triggered queues and Data Sender on every send target', () => {
  const main = bicep('infra/main.bicep');
  const m = app.messaging;
  assert.deepEqual(checkAppEntities(main.text, config, m), []);
  // Removing a triggered queue from receivesFromQueues: it is still a send target, so a
  // "receives or sends" check passed it, but its trigger would be refused in Azure.
  reports(
    checkAppEntities(withList(main, 'receivesFromQueues', without('agent-payment')).text, config, m),
    /trigger listens on queue agent-payment, but receivesFromQueues lacks it/,
  );
  reports(
    checkAppEntities(
      withList(main, 'receivesFromQueues', (names) => ['operator-alerts', ...names]).text,
      config,
      m,
    ),
    /grants Data Receiver on operator-alerts, but no trigger listens/,
  );
  // A new trigger in functions/ with no matching role.
  const more = { ...m, triggerQueues: [...m.triggerQueues, appQueues.operatorAlerts] };
  reports(checkAppEntities(main.text, config, more), /listens on queue operator-alerts/);
  const sub = { ...m, triggerSubscriptions: ['order-status/all'] };
  reports(checkAppEntities(main.text, config, sub), /listens on subscription order-status\/all/);
  reports(
    checkAppEntities(broken(main, "sendsToTopics: ['order-status']", 'sendsToTopics: []').text, config, m),
    /sends to topic order-status, but sendsToTopics lacks it/,
  );
  reports(
    checkAppEntities(withList(main, 'sendsToQueues', without('operator-alerts')).text, config, m),
    /sends to queue operator-alerts, but sendsToQueues lacks it/,
  );
  reports(
    checkAppEntities(withList(main, 'sendsToQueues', without('poison')).text, config, m),
    /sends to queue poison, but sendsToQueues lacks it/,
  );
  reports(
    checkAppEntities(
      broken(main, "sendsToTopics: ['order-status']", "sendsToTopics: ['order-events']").text,
      config,
      m,
    ),
    /order-events, which Config\.json does not declare/,
  );
  reports(
    checkAppEntities(
      broken(main, "operatorAlertsQueue: 'operator-alerts'", "operatorAlertsQueue: 'ops'").text,
      config,
      m,
    ),
    /names ops/,
  );
  reports(
    checkAppEntities(
      withList(main, 'sendsToQueues', (names) => ['order-status', ...names.slice(1)]).text,
      config,
      m,
    ),
    /order-status as a queue/,
  );
  reports(
    checkAppEntities(
      broken(main, /\n\s*receivesFromQueues: appEntities\.receivesFromQueues/, '').text,
      config,
      m,
    ),
    /appEntities\.receivesFromQueues is not passed to any module/,
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
  reports(
    checkNoSecrets([
      broken(
        api,
        '  AZURE_CLIENT_ID:',
        '  APPINSIGHTS_INSTRUMENTATIONKEY: applicationInsights.properties.InstrumentationKey\n  AZURE_CLIENT_ID:',
      ),
    ]),
    /APPINSIGHTS_INSTRUMENTATIONKEY/,
  );
  reports(
    checkNoSecrets([
      broken(
        api,
        /APPLICATIONINSIGHTS_CONNECTION_STRING: [^\n]*/,
        "APPLICATIONINSIGHTS_CONNECTION_STRING: 'InstrumentationKey=00000000-0000-0000-0000-000000000000'",
      ),
    ]),
    /instrumentation key/,
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
      broken(
        bicep('infra/app/order-storage.bicep'),
        'allowSharedKeyAccess: false',
        'allowSharedKeyAccess: true',
      ),
    ),
    /order-storage\.bicep.*allowSharedKeyAccess: false/,
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
  reports(
    check(broken(bicep('infra/app/monitoring.bicep'), 'disableLocalAuth: true', 'disableLocalAuth: false')),
    /Log Analytics workspace does not set features\.disableLocalAuth/,
  );
  // The conformance namespace is held to the same rules as the app's.
  reports(
    check(broken(bicep('infra/conformance/main.bicep'), 'disableLocalAuth: true', 'disableLocalAuth: false')),
    /infra\/conformance\/main\.bicep:newNamespace does not set disableLocalAuth/,
  );
});

test('role assignments: guid() names, role ids as in the built-in roles reference, Service Bus roles per entity', () => {
  const rbacFiles = [
    'infra/app/rbac.bicep',
    'infra/conformance/main.bicep',
    'infra/app/order-storage.bicep',
  ].map(bicep);
  for (const f of rbacFiles) assert.deepEqual(checkRbac(f, builtInRoleIds), [], f.path);
  const [rbac, conf] = rbacFiles;
  // A wrong id in the Bicep fails against the independent table (Azure Service Bus Data Owner's id here).
  reports(
    checkRbac(
      broken(
        rbac,
        "serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'",
        "serviceBusDataSender: '090c5cfd-751d-490a-894a-3ce6f1109419'",
      ),
      builtInRoleIds,
    ),
    /serviceBusDataSender = 090c5cfd.*built-in role's id is 69a216fc/,
  );
  reports(
    checkRbac(
      broken(
        conf,
        "serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'",
        "serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e1'",
      ),
      builtInRoleIds,
    ),
    /serviceBusDataReceiver = 4f6d3b9b-027b-4f4c-9142-0e5a2a2247e1/,
  );
  reports(
    checkRbac(
      broken(
        rbac,
        'var roles = {',
        "var roles = {\n  serviceBusDataOwner: '090c5cfd-751d-490a-894a-3ce6f1109419'",
      ),
      builtInRoleIds,
    ),
    /role serviceBusDataOwner .* is not a verified built-in role/,
  );
  reports(
    checkRbac(
      broken(
        rbac,
        /roleDefinitionId: subscriptionResourceId\('Microsoft\.Authorization\/roleDefinitions', roles\.monitoringMetricsPublisher\)/,
        "roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', 'acdd72a7-3385-48ef-bd42-f606fba81ae7')",
      ),
      builtInRoleIds,
    ),
    /role id acdd72a7-3385-48ef-bd42-f606fba81ae7 written outside the roles table/,
  );
  reports(
    checkRbac(
      broken(rbac, /name: guid\(applicationInsights\.id[^\n]*/, "name: 'fixed-name'"),
      builtInRoleIds,
    ),
    /appTelemetry: name is not a guid/,
  );
  reports(
    checkRbac(broken(rbac, 'scope: receiveQueues[i]', 'scope: namespace'), builtInRoleIds),
    /scoped to the whole namespace/,
  );
  reports(
    checkRbac(broken(conf, /scope: fixtureQueues\[i\]/, 'scope: newNamespace'), builtInRoleIds),
    /scoped to the whole namespace/,
  );
});

test('the Function App runs on Flex Consumption, Node 24, deploying with its identity; azd finds it', () => {
  const api = bicep('infra/app/api.bicep').text;
  assert.match(api, /tier: 'FlexConsumption'\s*\n\s*name: 'FC1'/);
  assert.match(api, /runtime: \{\s*name: 'node'\s*version: '24'\s*\}/);
  // One Node major everywhere: what Azure runs, what CI installs (.nvmrc) and what npm accepts.
  const major = read('.nvmrc').trim().split('.')[0];
  assert.equal(major, '24');
  const pkg = JSON.parse(read('package.json')) as {
    engines: { node: string };
    devDependencies: Record<string, string>;
  };
  assert.equal(pkg.engines.node, `>=${major}`);
  assert.equal(pkg.devDependencies['@types/node'].split('.')[0], major);
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

test('operators sign in through App Service Authentication (Entra ID, anonymous let through), with the role the app checks', () => {
  const files: OperatorAuthFiles = {
    apiBicep: bicep('infra/app/api.bicep').text,
    mainBicep: bicep('infra/main.bicep').text,
    parametersJson: read('infra/main.parameters.json'),
    azureYaml: read('azure.yaml'),
    rolesJson: read('infra/hooks/operator-app-roles.json'),
    preprovision: read('infra/hooks/preprovision.sh'),
    role: operatorRole,
  };
  assert.deepEqual(checkOperatorAuth(files), []);
  assert.ok(existsSync(join(root, 'infra/hooks/postprovision.sh')));

  const mutate = (key: keyof OperatorAuthFiles, from: string, to: string, pattern: RegExp) => {
    assert.ok(files[key].includes(from), `mutation target ${from} in ${key}`);
    reports(checkOperatorAuth({ ...files, [key]: files[key].replace(from, to) }), pattern);
  };
  mutate(
    'apiBicep',
    "unauthenticatedClientAction: 'AllowAnonymous'",
    "unauthenticatedClientAction: 'RedirectToLoginPage'",
    /AllowAnonymous/,
  );
  mutate('apiBicep', 'requireAuthentication: false', 'requireAuthentication: true', /requireAuthentication/);
  mutate('apiBicep', "name: 'authsettingsV2'", "name: 'authsettings'", /authsettingsV2/);
  mutate('apiBicep', 'clientId: operatorAuthClientId', "clientId: 'x'", /clientId/);
  mutate('apiBicep', "'api://${operatorAuthClientId}'", "'x'", /allowedAudiences/);
  mutate('mainBicep', 'operatorAuthClientId: operatorAuthClientId', '', /api module/);
  mutate('parametersJson', '${OPERATOR_AUTH_CLIENT_ID}', '${OTHER}', /main\.parameters\.json/);
  mutate('rolesJson', `"value": "${operatorRole}"`, '"value": "Operators"', /no app role/);
  mutate('azureYaml', 'run: ./infra/hooks/preprovision.sh', 'run: ./other.sh', /preprovision hook/);
  mutate('preprovision', 'azd env set OPERATOR_AUTH_CLIENT_ID "$app_id"', '', /OPERATOR_AUTH_CLIENT_ID/);
  reports(checkOperatorAuth({ ...files, role: 'Admin' }), /no app role with value "Admin"/);
});

test('operator routes are anonymous to the host and guarded in code; client routes need the function key', () => {
  const levels: Record<string, string> = {
    listOrders: 'anonymous',
    resubmitOrder: 'anonymous',
    cancelOrder: 'anonymous',
    retryOrder: 'anonymous',
    orderHistory: 'anonymous',
    orderCounts: 'anonymous',
    orderChanges: 'anonymous',
    bulkOrderAction: 'anonymous',
    submitOrder: 'function',
    getOrder: 'function',
  };
  const seen = new Set<string>();
  for (const f of filesUnder('functions', '.ts').filter((file) => /app\.http\(/.test(file.text))) {
    const name = /app\.http\('(\w+)'/.exec(f.text)?.[1] ?? '';
    if (!(name in levels)) continue; // other routes (e.g. documents) decide for themselves
    seen.add(name);
    assert.equal(/authLevel: '(\w+)'/.exec(f.text)?.[1], levels[name], `${f.path} (${name})`);
  }
  assert.deepEqual([...seen].sort(), Object.keys(levels).sort(), 'every order route was found');
  const orderApi = read('shared/http/orderApi.ts');
  const guarded = (fn: string) => {
    const start = orderApi.indexOf(`export async function ${fn}(`);
    const startAction = start >= 0 ? start : orderApi.indexOf(`async function ${fn}(`);
    return (
      startAction >= 0 && /requireOperator\(request\)/.test(orderApi.slice(startAction, startAction + 400))
    );
  };
  assert.ok(guarded('listOrders'), 'listOrders starts with requireOperator');
  assert.ok(
    guarded('operatorAction'),
    'resubmit and cancel go through operatorAction, which starts with requireOperator',
  );
  assert.match(orderApi, /export function resubmitOrder[\s\S]*?return operatorAction\(/);
  assert.match(orderApi, /export function cancelOrder[\s\S]*?return operatorAction\(/);
  assert.match(orderApi, /export function retryOrder[\s\S]*?return operatorAction\(/);
  const operatorApi = read('shared/http/operatorApi.ts');
  for (const fn of ['orderHistory', 'orderCounts', 'orderChanges', 'bulkAction']) {
    const start = operatorApi.indexOf(`export async function ${fn}(`);
    assert.ok(
      start >= 0 && /requireOperator\(request\)/.test(operatorApi.slice(start, start + 400)),
      `${fn} starts with requireOperator`,
    );
  }
});

test("the app identity may read and settle every dead-letter source the operator's routes list", () => {
  const main = bicep('infra/main.bicep');
  const rbac = bicep('infra/app/rbac.bicep');
  const sources = {
    queues: deadLetterQueues,
    subscriptions: orderStatusSubscriptions.map((s) => `${appTopics.orderStatus}/${s}`),
  };
  assert.deepEqual(checkDeadLetterAccess(main.text, rbac.text, sources), []);
  reports(
    checkDeadLetterAccess(
      broken(
        main,
        "readsDeadLettersOfSubscriptions: ['order-status/all']",
        'readsDeadLettersOfSubscriptions: []',
      ).text,
      rbac.text,
      sources,
    ),
    /readsDeadLettersOfSubscriptions is \[\]/,
  );
  reports(
    checkDeadLetterAccess(
      broken(main, /\n\s*readsDeadLettersOfQueues: appEntities\.readsDeadLettersOfQueues/, '').text,
      rbac.text,
      sources,
    ),
    /readsDeadLettersOfQueues is not passed/,
  );
  reports(
    checkDeadLetterAccess(
      main.text,
      broken(rbac, '(queueName, i) in deadLetterOnlyQueues:', '(queueName, i) in receivesFromQueues:').text,
      sources,
    ),
    /no Data Receiver on the dead-letter queues/,
  );
  reports(
    checkDeadLetterAccess(
      main.text,
      broken(rbac, /scope: deadLetterSubscriptions\[i\]/, 'scope: namespace').text,
      sources,
    ),
    /no Data Receiver on the dead-letter subscriptions/,
  );
  const more = { ...sources, subscriptions: [...sources.subscriptions, 'order-status/billing'] };
  reports(checkDeadLetterAccess(main.text, rbac.text, more), /dead-letter subscriptions are/);
});

test('every declared step has its Agent queue and service URL setting in Config.json, Bicep and the sample settings', () => {
  const files: DeploymentFiles = {
    config,
    mainBicep: read('infra/main.bicep'),
    apiBicep: read('infra/app/api.bicep'),
    parameters: JSON.parse(read('infra/main.parameters.json')) as DeploymentFiles['parameters'],
    local: localSettings,
  };
  assert.ok(declaredAgents(orderWorkflow.steps).length >= 3);
  assert.deepEqual(checkDeclaredSteps(declaredAgents(orderWorkflow.steps), files), []);

  // A new step declared without its infrastructure: every missing piece is named, with where.
  const probe: StepDeclaration = {
    name: 'probe-check',
    agent: 'probe',
    action: 'probe',
    compensation: null,
    refusals: { statuses: [422], problemTypes: [] },
  };
  const grown = [orderWorkflow.steps[0], probe, ...orderWorkflow.steps.slice(1)];
  const problems = checkDeclaredSteps(declaredAgents(grown), files);
  const expected = [
    /step probe-check \(Agent probe\): add queue agent-probe to infra\/servicebus-emulator\/Config\.json \(copy the Properties of agent-inventory\)/,
    /add 'agent-probe' to appEntities\.receivesFromQueues in infra\/main\.bicep/,
    /add 'agent-probe' to appEntities\.sendsToQueues in infra\/main\.bicep/,
    /add queue agent-probe-waiting to infra\/servicebus-emulator\/Config\.json \(copy the Properties of agent-inventory-waiting\)/,
    /add 'agent-probe-waiting' to appEntities\.receivesFromQueues in infra\/main\.bicep/,
    /add 'agent-probe-waiting' to appEntities\.sendsToQueues in infra\/main\.bicep/,
    /add `param probeServiceUrl string` to infra\/main\.bicep/,
    /pass `probeServiceUrl: probeServiceUrl` to the api module in infra\/main\.bicep/,
    /add `param probeServiceUrl string` to infra\/app\/api\.bicep/,
    /add `PROBE_SERVICE_URL: probeServiceUrl` to appSettings in infra\/app\/api\.bicep/,
    /add "probeServiceUrl": \{ "value": "\$\{PROBE_SERVICE_URL\}" \} to infra\/main\.parameters\.json/,
    /add PROBE_SERVICE_URL to local\.settings\.sample\.json Values/,
  ];
  assert.equal(problems.length, expected.length, JSON.stringify(problems, null, 1));
  for (const pattern of expected) reports(problems, pattern);

  // A removed step leaves its queue behind.
  const shrunk = declaredAgents(orderWorkflow.steps.filter((s) => s.name !== 'shipping'));
  assert.deepEqual(checkDeclaredSteps(shrunk, files), [
    "Config.json declares queue agent-shipping, but no declared step's Agent listens on it: remove it",
    "Config.json declares queue agent-shipping-waiting, but no declared step's Agent listens on it: remove it",
  ]);
  // The settings table of a step names its own setting: a wrong value is caught.
  const api = broken(
    bicep('infra/app/api.bicep'),
    'PAYMENT_SERVICE_URL: paymentServiceUrl',
    'PAYMENT_SERVICE_URL: shippingServiceUrl',
  );
  reports(
    checkDeclaredSteps(declaredAgents(orderWorkflow.steps), { ...files, apiBicep: api.text }),
    /step payment \(Agent payment\): add `PAYMENT_SERVICE_URL: paymentServiceUrl`/,
  );
});
