/**
 * infra/ against the app's telemetry (issue 16): alerts and workbook name only metrics the app
 * emits, every alert pages the action group, the in-flight bound follows the app's settings,
 * and the operator alert line is queried with the app's text and kept out of sampling. Each
 * check also runs on a deliberately broken copy, to prove it can fail.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { metricNames } from '../../shared/observability/metricNames.js';
import type { BicepFile, SourceFile } from './drift-checks.js';
import {
  checkAlertsHaveActionGroup,
  checkInFlightBound,
  checkLogAlertScopes,
  checkOperatorAlertRule,
  checkQueriesUseKnownMetrics,
  checkSamplingKeepsAlertLine,
  checkWorkbook,
  checkWorkbookLoaded,
  kqlMetricNames,
  logAlerts,
  operatorAlertLogText,
} from './observability-checks.js';

// Compiled to dist/test/infra; the sources live at the repository root.
const root = resolve(__dirname, '..', '..', '..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');

function filesUnder(dir: string, ext: string): BicepFile[] {
  const out: BicepFile[] = [];
  const walk = (abs: string) => {
    for (const name of readdirSync(abs)) {
      const full = join(abs, name);
      if (statSync(full).isDirectory()) walk(full);
      else if (name.endsWith(ext))
        out.push({ path: relative(root, full).split(sep).join('/'), text: readFileSync(full, 'utf8') });
    }
  };
  walk(join(root, dir));
  return out;
}

const known = Object.values(metricNames);
const bicepFiles = filesUnder('infra', '.bicep');
const bicep = (path: string): BicepFile => {
  const f = bicepFiles.find((b) => b.path === path);
  assert.ok(f, `${path} exists`);
  return f;
};
const alertsFile = bicep('infra/app/alerts.bicep');
const workbookFile = bicep('infra/app/workbook.bicep');
const mainFile = bicep('infra/main.bicep');
const workbookJson = read('infra/app/workbook.json');
const appSources: SourceFile[] = [...filesUnder('functions', '.ts'), ...filesUnder('shared', '.ts')];

function broken(text: string, from: string | RegExp, to: string): string {
  assert.ok(typeof from === 'string' ? text.includes(from) : from.test(text), `mutation target ${from}`);
  return text.replace(from, to);
}
function brokenFile(file: BicepFile, from: string | RegExp, to: string): BicepFile {
  return { path: file.path, text: broken(file.text, from, to) };
}
function reports(problems: string[], pattern: RegExp): void {
  assert.ok(
    problems.some((p) => pattern.test(p)),
    `expected a problem matching ${pattern}, got: ${JSON.stringify(problems)}`,
  );
}
const queriesOf = (files: BicepFile[]) => {
  const { alerts, problems } = logAlerts(files);
  assert.deepEqual(problems, []);
  return alerts.map((a) => ({ where: `${a.file}:${a.symbol}`, query: a.query }));
};

test('the metric names are the twenty-one the alerts and the workbook read, under the order-processing meter', () => {
  assert.deepEqual([...known].sort(), [
    'approvals.pending',
    'callbacks.received',
    'callbacks.refused',
    'deadletters',
    'orders.compensations',
    'orders.given_up',
    'orders.in_flight',
    'orders.oldest_in_flight_age',
    'orders.submitted',
    'orders.terminal',
    'remote.call_concurrency',
    'remote.call_pauses',
    'remote.call_rate',
    'remote.call_waits',
    'remote.calls_waiting',
    'remote.failures',
    'remote.oldest_waiting_age',
    'step.attempts',
    'step.duration',
    'step.timeouts',
    'steps.waiting',
  ]);
  assert.deepEqual(kqlMetricNames('customMetrics | where name in ("a", "b") or name == "c" or name =~ "d"'), [
    'c',
    'd',
    'a',
    'b',
  ]);
});

/**
 * The names the app's sources give their instruments: `meter.createCounter(metricNames.key, ...)`
 * resolves to metricNames.ts's value; a string literal counts as itself (and is refused below).
 */
function instrumentNames(sources: SourceFile[]): string[] {
  const pattern =
    /\.create(?:Counter|UpDownCounter|Histogram|Gauge|Observable\w+)\(\s*(?:'([^']+)'|metricNames\.(\w+))/g;
  const byKey = metricNames as Record<string, string>;
  return sources.flatMap((f) =>
    [...f.text.matchAll(pattern)].map((m) => m[1] ?? byKey[m[2]!] ?? `metricNames.${m[2]}?`),
  );
}

/** Instruments named by a string literal: each name is written once, in metricNames.ts. */
function literalNames(sources: SourceFile[]): string[] {
  const pattern = /\.create(?:Counter|UpDownCounter|Histogram|Gauge|Observable\w+)\(\s*'([^']+)'/g;
  return sources.flatMap((f) => [...f.text.matchAll(pattern)].map((m) => `${f.path}: ${m[1]}`));
}

test('every instrument the app creates is named in metricNames.ts, and every name there is created', () => {
  const created = instrumentNames(appSources);
  assert.ok(created.length >= known.length, `found ${created.length} instruments in the sources`);
  assert.deepEqual([...new Set(created)].sort(), [...known].sort());
  assert.deepEqual(literalNames(appSources), []);
  // An instrument added without its name, or by a literal: the checks say which.
  const extra = { path: 'shared/x.ts', text: "meter.createGauge('remote.new_gauge', {})" };
  assert.ok(instrumentNames([...appSources, extra]).includes('remote.new_gauge'));
  assert.ok(!(known as readonly string[]).includes('remote.new_gauge'));
  assert.deepEqual(literalNames([extra]), ['shared/x.ts: remote.new_gauge']);
  const unknownKey = { path: 'shared/y.ts', text: 'meter.createGauge(metricNames.newGauge, {})' };
  assert.deepEqual(instrumentNames([unknownKey]), ['metricNames.newGauge?']);
});

test('log alerts are read from the Bicep with their KQL, and name only metrics the app emits', () => {
  const { alerts } = logAlerts([alertsFile]);
  assert.deepEqual(
    alerts.map((a) => a.symbol),
    [
      'inFlightTooOld',
      'errorRate',
      'serviceOutage',
      'callWaitTooLong',
      'operatorAlertLogged',
      'gaugesSilent',
    ],
  );
  assert.match(alerts[0].query, /^customMetrics\n\| where name == "orders\.oldest_in_flight_age"\n/);
  const queries = queriesOf([alertsFile]);
  assert.deepEqual(checkQueriesUseKnownMetrics(queries, known), []);
  // The metrics the rules watch, so a rule cannot quietly stop reading its metric.
  const watched = new Set(queries.flatMap((q) => kqlMetricNames(q.query)));
  for (const m of [
    metricNames.ordersOldestInFlightAge,
    metricNames.ordersTerminal,
    metricNames.remoteFailures,
    metricNames.ordersInFlight,
    metricNames.oldestCallWaitAge,
  ])
    assert.ok(watched.has(m), `an alert watches ${m}`);

  reports(
    checkQueriesUseKnownMetrics(
      queriesOf([brokenFile(alertsFile, '"orders.oldest_in_flight_age"', '"orders.oldest_age"')]),
      known,
    ),
    /inFlightTooOld queries metric "orders\.oldest_age", which the app does not emit/,
  );
  reports(
    checkQueriesUseKnownMetrics(
      queriesOf([brokenFile(alertsFile, '| where name == "remote.failures"', '| where value > 0')]),
      known,
    ),
    /serviceOutage reads customMetrics without naming a metric/,
  );
  reports(
    logAlerts([brokenFile(alertsFile, /query: join\(\n\s*\[\n\s*'traces'/, "query: someVar\n[\n'traces'")])
      .problems,
    /operatorAlertLogged: query is neither a string nor join/,
  );
});

test('every alert rule pages the action group, and log alerts run against Application Insights', () => {
  assert.deepEqual(checkAlertsHaveActionGroup(bicepFiles), []);
  const { alerts } = logAlerts(bicepFiles);
  assert.equal(alerts.length, 6);
  assert.deepEqual(checkLogAlertScopes(alerts), []);

  const check = (file: BicepFile) =>
    checkAlertsHaveActionGroup(bicepFiles.map((f) => (f.path === file.path ? file : f)));
  reports(
    check(brokenFile(alertsFile, /actions: \{\n\s*actionGroups: \[actionGroup\.id\]\n\s*\}/, 'actions: {}')),
    /inFlightTooOld has no action group/,
  );
  reports(
    check(
      brokenFile(
        alertsFile,
        /actions: \[\n\s*\{\n\s*actionGroupId: actionGroup\.id\n\s*\}\n\s*\]/,
        'actions: []',
      ),
    ),
    /operatorAlertsWaiting has no action group/,
  );
  reports(
    check(brokenFile(alertsFile, 'actionGroups: [actionGroup.id]', 'actionGroups: [other.id]')),
    /sends to other, which is not an action group/,
  );
  reports(
    check(
      brokenFile(
        alertsFile,
        "displayName: 'Orders ending in Error'\n    description",
        "displayName: 'Orders ending in Error'\n    enabled: false\n    description",
      ),
    ),
    /errorRate is disabled/,
  );
  reports(
    checkLogAlertScopes(
      logAlerts([brokenFile(alertsFile, 'scopes: [applicationInsights.id]', 'scopes: [namespace.id]')])
        .alerts,
    ),
    /inFlightTooOld is not scoped to the Application Insights component/,
  );
});

test('the in-flight bound is (step + claim timeout) x hard threshold from the app-setting parameters', () => {
  const check = (main: string, alerts = alertsFile.text, wb = workbookFile.text) =>
    checkInFlightBound(main, alerts, wb);
  assert.deepEqual(check(mainFile.text), []);
  reports(
    check(broken(mainFile.text, '* int(failureHardThreshold)', '* 5')),
    /not \(step \+ claim timeout\) x hard threshold/,
  );
  reports(
    check(
      broken(mainFile.text, /\n\s*stepTimeoutSeconds: stepTimeoutSeconds/, "\n    stepTimeoutSeconds: '30'"),
    ),
    /does not pass stepTimeoutSeconds to the app settings/,
  );
  reports(
    check(
      broken(
        mainFile.text,
        /\n\s*inFlightAgeBoundSeconds: inFlightAgeBoundSeconds\n\s*errorRatePercent/,
        '\n    errorRatePercent',
      ),
    ),
    /not passed to both/,
  );
  reports(
    check(mainFile.text, broken(alertsFile.text, 'threshold: inFlightAgeBoundSeconds', 'threshold: 600')),
    /inFlightTooOld: threshold is not inFlightAgeBoundSeconds/,
  );
  reports(
    check(
      mainFile.text,
      alertsFile.text,
      broken(workbookFile.text, 'string(inFlightAgeBoundSeconds)', "'600'"),
    ),
    /does not fill in the in-flight bound/,
  );
});

test("a log alert matches the operator alert line with the app's exact text", () => {
  const text = operatorAlertLogText(appSources);
  assert.equal(text, 'operator alert');
  const { alerts } = logAlerts([alertsFile]);
  assert.deepEqual(checkOperatorAlertRule(alerts, text), []);
  // The app changes its text: the rule no longer matches and the check says so.
  reports(checkOperatorAlertRule(alerts, 'operator alert raised'), /no log alert queries traces for/);
  const weakened = logAlerts([brokenFile(alertsFile, 'severityLevel >= 3 and ', '')]).alerts;
  reports(checkOperatorAlertRule(weakened, text), /severityLevel >= 3/);
  const loose = logAlerts([
    brokenFile(
      alertsFile,
      '| where tostring(line.msg) == "operator alert"\'',
      '| where message contains "operator alert"\'',
    ),
  ]).alerts;
  reports(checkOperatorAlertRule(loose, text), /msg field exactly/);
  // The app's line moves out of carryOut's RaiseOperatorAlert branch: nothing to check against.
  const source = appSources.find((f) => f.text.includes("command.type === 'RaiseOperatorAlert')"));
  assert.ok(source, 'carryOut is found');
  const renamed = {
    ...source,
    text: broken(source.text, "log?.error('operator alert'", "log?.warn('operator alert'"),
  };
  assert.equal(operatorAlertLogText([renamed]), undefined);
  reports(checkOperatorAlertRule(alerts, undefined), /not found in the app sources/);
});

test('host.json never samples the operator alert line (Trace excluded from sampling, Error not filtered)', () => {
  const hostJson = JSON.parse(read('host.json')) as Parameters<typeof checkSamplingKeepsAlertLine>[0];
  assert.deepEqual(checkSamplingKeepsAlertLine(hostJson), []);
  const sampling = (s: object) => ({ logging: { applicationInsights: { samplingSettings: s } } });
  reports(
    checkSamplingKeepsAlertLine(sampling({ isEnabled: true, excludedTypes: 'Request;Exception' })),
    /samples Trace telemetry/,
  );
  reports(checkSamplingKeepsAlertLine({}), /samples Trace telemetry/);
  reports(
    checkSamplingKeepsAlertLine(sampling({ isEnabled: true, includedTypes: 'Trace;Dependency' })),
    /samples Trace telemetry/,
  );
  assert.deepEqual(checkSamplingKeepsAlertLine(sampling({ isEnabled: false })), []);
  assert.deepEqual(
    checkSamplingKeepsAlertLine(sampling({ isEnabled: true, includedTypes: 'Dependency' })),
    [],
  );
  assert.deepEqual(
    checkSamplingKeepsAlertLine(sampling({ isEnabled: true, excludedTypes: 'Request; trace' })),
    [],
  );
  reports(
    checkSamplingKeepsAlertLine({
      logging: {
        logLevel: { 'Function.scheduler': 'None' },
        applicationInsights: { samplingSettings: { excludedTypes: 'Trace' } },
      },
    }),
    /logLevel Function\.scheduler: None drops/,
  );
});

test('the workbook is loaded from its JSON file and charts every metric the app emits, and no other', () => {
  const workbook = JSON.parse(workbookJson) as Parameters<typeof checkWorkbook>[0];
  assert.deepEqual(checkWorkbook(workbook, known), []);
  assert.deepEqual(checkWorkbookLoaded(workbookFile.text, 'workbook.json'), []);
  // Placeholders are plain JSON strings, so the substituted text stays valid JSON.
  const filled = workbookJson
    .replace(
      '__APPLICATION_INSIGHTS_ID__',
      '/subscriptions/s/resourceGroups/g/providers/Microsoft.Insights/components/c',
    )
    .replace('__IN_FLIGHT_AGE_BOUND_SECONDS__', '600');
  assert.doesNotThrow(() => JSON.parse(filled));

  const mutated = (from: string, to: string) =>
    JSON.parse(broken(workbookJson, from, to)) as Parameters<typeof checkWorkbook>[0];
  reports(
    checkWorkbook(mutated('where name == \\"deadletters\\"', 'where name == \\"dead_letters\\"'), known),
    /queries metric "dead_letters", which the app does not emit/,
  );
  reports(
    checkWorkbook(mutated('where name == \\"step.timeouts\\"', 'where value > 0'), known),
    /does not show step\.timeouts/,
  );
  reports(checkWorkbook(workbook, [...known, 'orders.new_metric']), /does not show orders\.new_metric/);
  reports(checkWorkbook(mutated('"Notebook/1.0"', '"Notebook/0.9"'), known), /version is Notebook\/0\.9/);
  reports(
    checkWorkbookLoaded(
      broken(workbookFile.text, "loadTextContent('./workbook.json')", "'{}'"),
      'workbook.json',
    ),
    /does not loadTextContent/,
  );
  reports(
    checkWorkbookLoaded(
      broken(workbookFile.text, 'serializedData: serialized', "serializedData: '{}'"),
      'workbook.json',
    ),
    /serializedData/,
  );
});
