/**
 * Drift checks between the app's telemetry and what infra/ watches (issue 16): the alert rules
 * and the workbook query only metric names the app emits (shared/observability/metricNames.ts),
 * every rule pages someone, the in-flight bound comes from the app's own settings, and the
 * operator alert's log line is queried with the app's exact text and never sampled away.
 * The Bicep is read as text, like drift-checks.ts.
 */
import { matchingBracket, resources, stringLiterals, stripComments } from './bicep-text.js';
import type { BicepFile, SourceFile } from './drift-checks.js';

/** Metric names a KQL query filters on: `name == "x"`, `name =~ "x"`, `name in ("x", "y")`. */
export function kqlMetricNames(kql: string): string[] {
  const names: string[] = [];
  for (const m of kql.matchAll(/\bname\s*(?:==|=~)\s*"([^"]*)"/g)) names.push(m[1]);
  for (const m of kql.matchAll(/\bname\s+in\s*\(([^)]*)\)/g)) {
    for (const s of m[1].matchAll(/"([^"]*)"/g)) names.push(s[1]);
  }
  return names;
}

const alertTypes = [
  'Microsoft.Insights/metricAlerts',
  'Microsoft.Insights/scheduledQueryRules',
  'Microsoft.Insights/activityLogAlerts',
];

export interface LogAlert {
  file: string;
  symbol: string;
  /** The KQL as deployed: the literals of `query:` (a string or join([...], '\n')), joined by newlines. */
  query: string;
  body: string;
}

/** Every scheduledQueryRules resource with the KQL of its (one) criterion. */
export function logAlerts(files: BicepFile[]): { alerts: LogAlert[]; problems: string[] } {
  const alerts: LogAlert[] = [];
  const problems: string[] = [];
  for (const f of files) {
    const text = stripComments(f.text);
    for (const r of resources(text)) {
      if (r.type !== 'Microsoft.Insights/scheduledQueryRules' || r.existing) continue;
      const at = /\bquery\s*:\s*/.exec(r.body);
      if (!at) {
        problems.push(`${f.path}:${r.symbol} has no query`);
        continue;
      }
      const start = at.index + at[0].length;
      let expr: string;
      if (r.body.startsWith('join(', start)) {
        const open = r.body.indexOf('[', start);
        expr = r.body.slice(open, matchingBracket(r.body, open) + 1);
      } else if (r.body[start] === "'") {
        expr = /^'(?:[^'\\]|\\.)*'/.exec(r.body.slice(start))?.[0] ?? '';
      } else {
        problems.push(`${f.path}:${r.symbol}: query is neither a string nor join([...])`);
        continue;
      }
      alerts.push({ file: f.path, symbol: r.symbol, query: stringLiterals(expr).join('\n'), body: r.body });
    }
  }
  return { alerts, problems };
}

/** Alert queries name only known metrics, and every customMetrics query names at least one. */
export function checkQueriesUseKnownMetrics(
  queries: { where: string; query: string }[],
  known: readonly string[],
): string[] {
  const problems: string[] = [];
  for (const { where, query } of queries) {
    const names = kqlMetricNames(query);
    for (const n of names) {
      if (!known.includes(n)) problems.push(`${where} queries metric "${n}", which the app does not emit`);
    }
    if (/\bcustomMetrics\b/.test(query) && names.length === 0) {
      problems.push(`${where} reads customMetrics without naming a metric`);
    }
  }
  return problems;
}

/** Every alert rule (metric, log or activity-log) sends to an action group declared in its file. */
export function checkAlertsHaveActionGroup(files: BicepFile[]): string[] {
  const problems: string[] = [];
  let rules = 0;
  for (const f of files) {
    const decls = resources(stripComments(f.text));
    const groups = decls.filter((r) => r.type === 'Microsoft.Insights/actionGroups').map((r) => r.symbol);
    for (const r of decls) {
      if (!alertTypes.includes(r.type) || r.existing) continue;
      rules++;
      const metricStyle = /actionGroupId\s*:\s*(\w+)\.id\b/.exec(r.body)?.[1];
      const logStyle = /actionGroups\s*:\s*\[\s*(\w+)\.id\s*\]/.exec(r.body)?.[1];
      const group = metricStyle ?? logStyle;
      if (!group) problems.push(`${f.path}:${r.symbol} has no action group`);
      else if (!groups.includes(group))
        problems.push(`${f.path}:${r.symbol} sends to ${group}, which is not an action group of this file`);
      if (/\benabled\s*:\s*false\b/.test(r.body)) problems.push(`${f.path}:${r.symbol} is disabled`);
    }
  }
  if (rules === 0) problems.push('no alert rules found under infra/');
  return problems;
}

/** Log alerts run against the Application Insights component (where customMetrics and traces live). */
export function checkLogAlertScopes(alerts: LogAlert[], componentSymbol = 'applicationInsights'): string[] {
  return alerts
    .filter((a) => !new RegExp(`scopes\\s*:\\s*\\[\\s*${componentSymbol}\\.id\\s*\\]`).test(a.body))
    .map((a) => `${a.file}:${a.symbol} is not scoped to the Application Insights component`);
}

/**
 * The in-flight bound: main.bicep computes it from the step and claim timeouts and the hard
 * threshold, the same parameters it hands the app settings, and the alert module's in-flight
 * rule and the workbook use it as given.
 */
export function checkInFlightBound(mainBicep: string, alertsBicep: string, workbookBicep: string): string[] {
  const problems: string[] = [];
  const main = stripComments(mainBicep);
  const formula = /var\s+inFlightAgeBoundSeconds\s*=\s*([^\n]+)/.exec(main)?.[1] ?? '';
  if (!formula) problems.push('main.bicep does not compute inFlightAgeBoundSeconds');
  const normalized = formula.replace(/\s+/g, '');
  if (
    formula &&
    normalized !== '(int(stepTimeoutSeconds)+int(claimTimeoutSeconds))*int(failureHardThreshold)'
  ) {
    problems.push(
      `inFlightAgeBoundSeconds is ${formula.trim()}, not (step + claim timeout) x hard threshold`,
    );
  }
  for (const p of ['stepTimeoutSeconds', 'claimTimeoutSeconds', 'failureHardThreshold']) {
    if (!new RegExp(`\\n\\s*${p}:\\s*${p}\\b`).test(main))
      problems.push(`main.bicep does not pass ${p} to the app settings (api module) as the bound uses it`);
  }
  const passed = main.match(/\n\s*inFlightAgeBoundSeconds:\s*inFlightAgeBoundSeconds\b/g) ?? [];
  if (passed.length < 2) problems.push('the bound is not passed to both the alerts and the workbook modules');
  const alerts = stripComments(alertsBicep);
  const rule = resources(alerts).find(
    (r) =>
      r.type === 'Microsoft.Insights/scheduledQueryRules' && r.body.includes('orders.oldest_in_flight_age'),
  );
  if (!rule) problems.push('no log alert reads orders.oldest_in_flight_age');
  else if (!/\bthreshold\s*:\s*inFlightAgeBoundSeconds\b/.test(rule.body))
    problems.push(`${rule.symbol}: threshold is not inFlightAgeBoundSeconds`);
  if (!/string\(inFlightAgeBoundSeconds\)/.test(stripComments(workbookBicep)))
    problems.push('workbook.bicep does not fill in the in-flight bound');
  return problems;
}

/** The message text of the error line carryOut writes for a RaiseOperatorAlert command. */
export function operatorAlertLogText(sources: SourceFile[]): string | undefined {
  for (const f of sources) {
    const m = /command\.type === 'RaiseOperatorAlert'\)\s*\{[\s\S]*?\blog\??\.error\(\s*'([^']+)'/.exec(
      f.text,
    );
    if (m) return m[1];
  }
  return undefined;
}

/**
 * A log alert looks for the operator alert's line: an error-level trace (severityLevel 3) whose
 * JSON `msg` is the app's exact text (shared/observability/logger.ts writes JSON lines).
 */
export function checkOperatorAlertRule(alerts: LogAlert[], text: string | undefined): string[] {
  if (!text) return ['the operator alert log line was not found in the app sources'];
  const rule = alerts.find((a) => /^\s*traces\b/.test(a.query) && a.query.includes(`"${text}"`));
  if (!rule) return [`no log alert queries traces for the operator alert line "${text}"`];
  const problems: string[] = [];
  if (!/severityLevel\s*>=\s*3\b/.test(rule.query))
    problems.push(`${rule.symbol}: does not keep to error-level traces (severityLevel >= 3)`);
  if (!new RegExp(`tostring\\(\\w+\\.msg\\)\\s*==\\s*"${text}"`).test(rule.query))
    problems.push(`${rule.symbol}: does not match the line's msg field exactly`);
  return problems;
}

interface HostJsonLogging {
  logging?: {
    logLevel?: Record<string, string>;
    applicationInsights?: {
      samplingSettings?: { isEnabled?: boolean; excludedTypes?: string; includedTypes?: string };
    };
  };
}

const types = (list: string | undefined) =>
  (list ?? '')
    .split(';')
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);

/**
 * The operator alert line reaches Application Insights whole: it is a Trace (the Functions host
 * records context.error as a trace with severity Error) and host.json's adaptive sampling has no
 * per-category exclusion, so Trace must be one of samplingSettings.excludedTypes (or sampling
 * off, or Trace left out of includedTypes); and no logLevel may drop Error for the category the
 * app's logs use (Function.<name>.User).
 */
export function checkSamplingKeepsAlertLine(hostJson: HostJsonLogging): string[] {
  const problems: string[] = [];
  const sampling = hostJson.logging?.applicationInsights?.samplingSettings;
  const enabled = sampling?.isEnabled ?? true;
  if (enabled) {
    const excluded = types(sampling?.excludedTypes);
    const included = types(sampling?.includedTypes);
    const sampled = excluded.includes('trace') ? false : included.length === 0 || included.includes('trace');
    if (sampled)
      problems.push(
        `host.json samples Trace telemetry (excludedTypes "${sampling?.excludedTypes ?? ''}"): the operator alert line can be dropped`,
      );
  }
  const quiet = ['critical', 'none'];
  for (const [category, level] of Object.entries(hostJson.logging?.logLevel ?? {})) {
    const applies = category === 'default' || category === 'Function' || category.startsWith('Function.');
    if (applies && quiet.includes(level.toLowerCase()))
      problems.push(`host.json logLevel ${category}: ${level} drops the operator alert's Error line`);
  }
  return problems;
}

interface WorkbookItem {
  type: number;
  name?: string;
  content?: { version?: string; query?: string; resourceType?: string; items?: WorkbookItem[] };
}

/** Every query of a serialized workbook, groups included. */
export function workbookQueries(workbook: { items?: WorkbookItem[] }): { where: string; query: string }[] {
  const out: { where: string; query: string }[] = [];
  const walk = (items: WorkbookItem[] | undefined) => {
    for (const item of items ?? []) {
      if (item.type === 3 && item.content?.query !== undefined)
        out.push({ where: `workbook item ${item.name ?? '?'}`, query: item.content.query });
      walk(item.content?.items);
    }
  };
  walk(workbook.items);
  return out;
}

/** The workbook is a Notebook/1.0 document that charts every metric the app emits. */
export function checkWorkbook(
  workbook: { version?: string; items?: WorkbookItem[]; fallbackResourceIds?: string[] },
  known: readonly string[],
): string[] {
  const problems: string[] = [];
  if (workbook.version !== 'Notebook/1.0') problems.push(`workbook version is ${workbook.version}`);
  const queries = workbookQueries(workbook);
  problems.push(...checkQueriesUseKnownMetrics(queries, known));
  const shown = new Set(queries.flatMap((q) => kqlMetricNames(q.query)));
  for (const name of known) if (!shown.has(name)) problems.push(`the workbook does not show ${name}`);
  if (!workbook.fallbackResourceIds?.includes('__APPLICATION_INSIGHTS_ID__'))
    problems.push('the workbook does not default to the deployed component (__APPLICATION_INSIGHTS_ID__)');
  return problems;
}

/** workbook.bicep loads the JSON file with loadTextContent and deploys it as serializedData. */
export function checkWorkbookLoaded(workbookBicep: string, jsonFileName: string): string[] {
  const text = stripComments(workbookBicep);
  const problems: string[] = [];
  if (!new RegExp(`loadTextContent\\('\\./${jsonFileName.replace('.', '\\.')}'\\)`).test(text))
    problems.push(`workbook.bicep does not loadTextContent('./${jsonFileName}')`);
  const wb = resources(text).find((r) => r.type === 'Microsoft.Insights/workbooks' && !r.existing);
  if (!wb) problems.push('workbook.bicep declares no Microsoft.Insights/workbooks resource');
  else if (!/serializedData\s*:\s*serialized\b/.test(wb.body))
    problems.push('the workbook resource does not deploy the loaded JSON as serializedData');
  if (!/'__APPLICATION_INSIGHTS_ID__',\s*applicationInsights\.id/.test(text))
    problems.push('workbook.bicep does not fill in the component id');
  return problems;
}
