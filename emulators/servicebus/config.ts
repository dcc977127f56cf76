/**
 * Reads the official Service Bus emulator's Config.json format into entity definitions.
 * Unknown or malformed values are rejected with a clear error rather than silently defaulted,
 * because a typo in a local config should not produce an emulator that differs from Azure.
 */
import { readFileSync } from 'node:fs';
import { parse as parseJsonc, printParseErrorCode, type ParseError } from 'jsonc-parser';
import { parseSqlAction, parseSqlFilter, SqlError, type Expr, type Statement } from './sql-filter.js';

export interface CorrelationFilter {
  correlationId?: string;
  messageId?: string;
  to?: string;
  replyTo?: string;
  subject?: string;
  sessionId?: string;
  replyToSessionId?: string;
  contentType?: string;
  properties?: Record<string, unknown>;
}

export type RuleFilter =
  | { kind: 'true' }
  | { kind: 'false' }
  | { kind: 'correlation'; filter: CorrelationFilter }
  | { kind: 'sql'; expression: string; expr: Expr };

export interface RuleConfig {
  name: string;
  filter: RuleFilter;
  /** A SQL rule action (SET / REMOVE), applied to the subscription's copy when the rule matches. */
  action?: { expression: string; statements: Statement[] };
}

/** Settings shared by queues and subscriptions: everything that governs a message store. */
export interface StoreConfig {
  lockDurationMs: number;
  maxDeliveryCount: number;
  defaultTtlMs: number;
  deadLetterOnExpiration: boolean;
  forwardTo?: string;
  forwardDeadLetteredTo?: string;
  requiresSession: boolean;
}

export interface DuplicateDetectionConfig {
  enabled: boolean;
  windowMs: number;
}

export interface QueueConfig extends StoreConfig {
  name: string;
  duplicateDetection: DuplicateDetectionConfig;
}

export interface SubscriptionConfig extends StoreConfig {
  name: string;
  rules: RuleConfig[];
}

export interface TopicConfig {
  name: string;
  defaultTtlMs: number;
  duplicateDetection: DuplicateDetectionConfig;
  subscriptions: SubscriptionConfig[];
}

export interface NamespaceConfig {
  name: string;
  queues: QueueConfig[];
  topics: TopicConfig[];
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const durationPattern =
  /^P(?!$)(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

/** Parses an ISO-8601 duration (PnYnMnDTnHnMnS) into milliseconds; years are 365 days, months 30. */
export function parseIsoDuration(value: string, where: string): number {
  const m = durationPattern.exec(value);
  if (!m) throw new ConfigError(`${where}: "${value}" is not an ISO-8601 duration (e.g. PT1M, PT30S, P14D)`);
  const n = (i: number): number => (m[i] ? Number(m[i]) : 0);
  const days = n(1) * 365 + n(2) * 30 + n(3) * 7 + n(4);
  return Math.round(((days * 24 + n(5)) * 60 + n(6)) * 60_000 + n(7) * 1000);
}

type Json = Record<string, unknown>;

function obj(value: unknown, where: string): Json {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new ConfigError(`${where} must be an object`);
  return value as Json;
}

function arr(value: unknown, where: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new ConfigError(`${where} must be an array`);
  return value;
}

function str(value: unknown, where: string, fallback?: string): string {
  if (value === undefined || value === null) {
    if (fallback !== undefined) return fallback;
    throw new ConfigError(`${where} is required`);
  }
  if (typeof value !== 'string') throw new ConfigError(`${where} must be a string`);
  return value;
}

function bool(value: unknown, where: string, fallback: boolean): boolean {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'boolean') throw new ConfigError(`${where} must be true or false`);
  return value;
}

function int(value: unknown, where: string, fallback: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new ConfigError(`${where} must be a positive integer`);
  }
  return value;
}

function duration(value: unknown, where: string, fallback: string): number {
  const ms = parseIsoDuration(str(value, where, fallback), where);
  if (ms <= 0) throw new ConfigError(`${where} must be longer than zero`);
  return ms;
}

function optionalName(value: unknown, where: string): string | undefined {
  const s = str(value, where, '');
  return s === '' ? undefined : s;
}

const entityNamePattern = /^[A-Za-z0-9]$|^[A-Za-z0-9][\w\-./]*[A-Za-z0-9]$/;

function entityName(value: unknown, where: string): string {
  const name = str(value, where);
  if (!entityNamePattern.test(name)) throw new ConfigError(`${where}: "${name}" is not a valid entity name`);
  return name;
}

function storeConfig(props: Json, where: string): StoreConfig {
  return {
    lockDurationMs: duration(props.LockDuration, `${where}.LockDuration`, 'PT1M'),
    maxDeliveryCount: int(props.MaxDeliveryCount, `${where}.MaxDeliveryCount`, 3),
    defaultTtlMs: duration(props.DefaultMessageTimeToLive, `${where}.DefaultMessageTimeToLive`, 'PT1H'),
    deadLetterOnExpiration: bool(
      props.DeadLetteringOnMessageExpiration,
      `${where}.DeadLetteringOnMessageExpiration`,
      false,
    ),
    forwardTo: optionalName(props.ForwardTo, `${where}.ForwardTo`),
    forwardDeadLetteredTo: optionalName(
      props.ForwardDeadLetteredMessagesTo,
      `${where}.ForwardDeadLetteredMessagesTo`,
    ),
    requiresSession: bool(props.RequiresSession, `${where}.RequiresSession`, false),
  };
}

function duplicateDetection(props: Json, where: string): DuplicateDetectionConfig {
  return {
    enabled: bool(props.RequiresDuplicateDetection, `${where}.RequiresDuplicateDetection`, false),
    windowMs: duration(
      props.DuplicateDetectionHistoryTimeWindow,
      `${where}.DuplicateDetectionHistoryTimeWindow`,
      'PT20S',
    ),
  };
}

const correlationKeys: Record<string, keyof CorrelationFilter> = {
  CorrelationId: 'correlationId',
  MessageId: 'messageId',
  To: 'to',
  ReplyTo: 'replyTo',
  Label: 'subject',
  Subject: 'subject',
  SessionId: 'sessionId',
  ReplyToSessionId: 'replyToSessionId',
  ContentType: 'contentType',
};

function rule(value: unknown, where: string): RuleConfig {
  const r = obj(value, where);
  const name = entityName(r.Name, `${where}.Name`);
  const props = obj(r.Properties, `${where}.Properties`);
  const action = ruleAction(props.Action, `${where}.Properties.Action`);
  const filter = ruleFilter(props, where);
  return action ? { name, filter, action } : { name, filter };
}

function ruleAction(value: unknown, where: string): RuleConfig['action'] {
  if (value === undefined || value === null) return undefined;
  const raw = obj(value, where);
  const expression = str(raw.SqlExpression, `${where}.SqlExpression`, '');
  if (expression.trim() === '') return undefined;
  try {
    return { expression, statements: parseSqlAction(expression) };
  } catch (err) {
    if (err instanceof SqlError) throw new ConfigError(`${where}.SqlExpression: ${err.message}`);
    throw err;
  }
}

function ruleFilter(props: Json, where: string): RuleFilter {
  const type = str(props.FilterType, `${where}.Properties.FilterType`);
  if (type === 'Correlation') {
    const raw = obj(props.CorrelationFilter, `${where}.Properties.CorrelationFilter`);
    const filter: CorrelationFilter = {};
    for (const [key, v] of Object.entries(raw)) {
      const where2 = `${where}.Properties.CorrelationFilter.${key}`;
      if (key === 'Properties') {
        filter.properties = obj(v, where2);
        continue;
      }
      const target = correlationKeys[key];
      if (!target) throw new ConfigError(`${where2} is not a correlation filter property`);
      (filter as Record<string, unknown>)[target] = str(v, where2);
    }
    if (Object.keys(filter).length === 0)
      throw new ConfigError(`${where}: a correlation filter needs a property`);
    return { kind: 'correlation', filter };
  }
  if (type === 'Sql') {
    const sql = obj(props.SqlFilter, `${where}.Properties.SqlFilter`);
    const swhere = `${where}.Properties.SqlFilter.SqlExpression`;
    const expression = str(sql.SqlExpression, swhere);
    const compact = expression.replace(/\s+/g, '').toLowerCase();
    // The two filters Azure itself creates (TrueFilter, FalseFilter) skip evaluation.
    if (compact === '1=1' || compact === 'true') return { kind: 'true' };
    if (compact === '1=0' || compact === 'false') return { kind: 'false' };
    try {
      return { kind: 'sql', expression, expr: parseSqlFilter(expression) };
    } catch (err) {
      if (err instanceof SqlError) throw new ConfigError(`${swhere}: ${err.message}`);
      throw err;
    }
  }
  throw new ConfigError(`${where}.Properties.FilterType must be "Correlation" or "Sql"`);
}

function uniqueNames(names: string[], where: string): void {
  const seen = new Set<string>();
  for (const n of names) {
    const key = n.toLowerCase();
    if (seen.has(key)) throw new ConfigError(`${where}: "${n}" is declared twice`);
    seen.add(key);
  }
}

/** Parses an already-loaded Config.json document. Only the first namespace is used, as in Microsoft's emulator. */
export function parseConfig(doc: unknown): NamespaceConfig {
  const root = obj(doc, 'config');
  const user = obj(root.UserConfig, 'UserConfig');
  const namespaces = arr(user.Namespaces, 'UserConfig.Namespaces');
  if (namespaces.length !== 1) throw new ConfigError('UserConfig.Namespaces must hold exactly one namespace');
  const ns = obj(namespaces[0], 'UserConfig.Namespaces[0]');
  const base = 'UserConfig.Namespaces[0]';
  const queues = arr(ns.Queues, `${base}.Queues`).map((q, i): QueueConfig => {
    const where = `${base}.Queues[${i}]`;
    const qo = obj(q, where);
    const props = obj(qo.Properties, `${where}.Properties`);
    return {
      name: entityName(qo.Name, `${where}.Name`),
      ...storeConfig(props, `${where}.Properties`),
      duplicateDetection: duplicateDetection(props, `${where}.Properties`),
    };
  });
  const topics = arr(ns.Topics, `${base}.Topics`).map((t, i): TopicConfig => {
    const where = `${base}.Topics[${i}]`;
    const to = obj(t, where);
    const props = obj(to.Properties, `${where}.Properties`);
    const defaultTtlMs = duration(
      props.DefaultMessageTimeToLive,
      `${where}.Properties.DefaultMessageTimeToLive`,
      'PT1H',
    );
    const subscriptions = arr(to.Subscriptions, `${where}.Subscriptions`).map((s, j): SubscriptionConfig => {
      const swhere = `${where}.Subscriptions[${j}]`;
      const so = obj(s, swhere);
      const sprops = obj(so.Properties, `${swhere}.Properties`);
      const rules = arr(so.Rules, `${swhere}.Rules`).map((r, k) => rule(r, `${swhere}.Rules[${k}]`));
      uniqueNames(
        rules.map((r) => r.name),
        `${swhere}.Rules`,
      );
      return {
        name: entityName(so.Name, `${swhere}.Name`),
        ...storeConfig(sprops, `${swhere}.Properties`),
        // A subscription without rules gets Azure's $Default rule: a true filter.
        rules: rules.length > 0 ? rules : [{ name: '$Default', filter: { kind: 'true' } }],
      };
    });
    uniqueNames(
      subscriptions.map((s) => s.name),
      `${where}.Subscriptions`,
    );
    return {
      name: entityName(to.Name, `${where}.Name`),
      defaultTtlMs,
      duplicateDetection: duplicateDetection(props, `${where}.Properties`),
      subscriptions,
    };
  });
  uniqueNames([...queues.map((q) => q.name), ...topics.map((t) => t.name)], `${base} (queues and topics)`);
  const config: NamespaceConfig = { name: str(ns.Name, `${base}.Name`, 'sbemulatorns'), queues, topics };
  checkForwardTargets(config);
  return config;
}

function checkForwardTargets(config: NamespaceConfig): void {
  const targets = new Set([...config.queues, ...config.topics].map((e) => e.name.toLowerCase()));
  const stores: Array<[string, StoreConfig]> = [
    ...config.queues.map((q): [string, StoreConfig] => [q.name, q]),
    ...config.topics.flatMap((t) =>
      t.subscriptions.map((s): [string, StoreConfig] => [`${t.name}/Subscriptions/${s.name}`, s]),
    ),
  ];
  for (const [name, s] of stores) {
    for (const target of [s.forwardTo, s.forwardDeadLetteredTo]) {
      if (target && !targets.has(target.toLowerCase())) {
        throw new ConfigError(`${name} forwards to "${target}", which is not a declared queue or topic`);
      }
    }
  }
}

/** Loads a Config.json from a path, or parses an object already in memory. */
export function loadConfig(source: string | object): NamespaceConfig {
  if (typeof source === 'string') {
    let text: string;
    try {
      text = readFileSync(source, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read ${source}: ${(err as Error).message}`);
    }
    return parseConfig(parseJsonWithComments(text, source));
  }
  return parseConfig(source);
}

/**
 * Microsoft's emulator reads Config.json with line and block comments (its own sample has them), so
 * this reads JSON with comments too; any other syntax error stops the start with its line.
 */
export function parseJsonWithComments(text: string, source: string): unknown {
  const errors: ParseError[] = [];
  const doc: unknown = parseJsonc(text, errors, { allowTrailingComma: false, disallowComments: false });
  if (errors.length > 0) {
    const first = errors[0];
    const before = text.slice(0, first.offset);
    const line = before.split('\n').length;
    const column = first.offset - before.lastIndexOf('\n');
    throw new ConfigError(
      `${source} is not valid JSON: ${printParseErrorCode(first.error)} at line ${line}, column ${column}`,
    );
  }
  return doc;
}
