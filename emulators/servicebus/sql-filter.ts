/**
 * Service Bus SQL filters and rule actions: a parser for the common subset of the grammar
 * (comparisons, AND/OR/NOT, IN, LIKE with ESCAPE, IS [NOT] NULL, EXISTS, arithmetic, sys. and
 * user. properties, SET and REMOVE) and its evaluation against an AMQP message.
 *
 * Parsing happens once, when the config is loaded, so a bad expression stops the start with
 * its position; evaluation walks the small tree per message. SQL's three-valued logic applies: a
 * missing user property is unknown, anything compared with unknown is unknown, and only a
 * filter that is true matches.
 */
import { plainValue } from './wireTypes.js';
import { randomUUID } from 'node:crypto';
import type { Message } from 'rhea';

export class SqlError extends Error {
  override name = 'SqlError';
}

/** System properties a filter may read (sys.X) and an action may set, with their AMQP fields. */
const systemProperties: Record<string, keyof Message> = {
  messageid: 'message_id',
  correlationid: 'correlation_id',
  to: 'to',
  replyto: 'reply_to',
  label: 'subject',
  subject: 'subject',
  sessionid: 'group_id',
  replytosessionid: 'reply_to_group_id',
  contenttype: 'content_type',
};

export type SqlValue = string | number | boolean | null | undefined;

type Property = { scope: 'sys' | 'user'; name: string };

export type Expr =
  | { kind: 'const'; value: SqlValue }
  | { kind: 'prop'; prop: Property }
  | { kind: 'newid' }
  | { kind: 'neg'; operand: Expr }
  | { kind: 'arith'; op: '+' | '-' | '*' | '/' | '%'; left: Expr; right: Expr }
  | { kind: 'cmp'; op: '=' | '<>' | '>' | '>=' | '<' | '<='; left: Expr; right: Expr }
  | { kind: 'and' | 'or'; left: Expr; right: Expr }
  | { kind: 'not'; operand: Expr }
  | { kind: 'isnull'; operand: Expr; negated: boolean }
  | { kind: 'in'; operand: Expr; list: Expr[]; negated: boolean }
  | { kind: 'like'; operand: Expr; pattern: RegExp; negated: boolean }
  | { kind: 'exists'; prop: Property };

export type Statement = { kind: 'set'; prop: Property; value: Expr } | { kind: 'remove'; prop: Property };

type Token =
  | { t: 'num'; v: number; at: number }
  | { t: 'str'; v: string; at: number }
  | { t: 'id'; v: string; quoted: boolean; at: number }
  | { t: 'op'; v: string; at: number }
  | { t: 'end'; at: number };

const keywords = new Set([
  'and',
  'or',
  'not',
  'in',
  'like',
  'escape',
  'is',
  'null',
  'exists',
  'true',
  'false',
  'set',
  'remove',
]);

function tokenize(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const at = i;
    if (c === "'") {
      let v = '';
      i++;
      for (;;) {
        if (i >= text.length) throw new SqlError(`unterminated string starting at position ${at + 1}`);
        if (text[i] === "'") {
          if (text[i + 1] === "'") {
            v += "'";
            i += 2;
            continue;
          }
          i++;
          break;
        }
        v += text[i++];
      }
      out.push({ t: 'str', v, at });
      continue;
    }
    if (c === '[' || c === '"') {
      const close = c === '[' ? ']' : '"';
      let v = '';
      i++;
      for (;;) {
        if (i >= text.length) throw new SqlError(`unterminated identifier starting at position ${at + 1}`);
        if (text[i] === close) {
          if (text[i + 1] === close) {
            v += close;
            i += 2;
            continue;
          }
          i++;
          break;
        }
        v += text[i++];
      }
      out.push({ t: 'id', v, quoted: true, at });
      continue;
    }
    const num = /^(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/.exec(text.slice(i));
    if (num) {
      out.push({ t: 'num', v: Number(num[0]), at });
      i += num[0].length;
      continue;
    }
    const id = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i));
    if (id) {
      out.push({ t: 'id', v: id[0], quoted: false, at });
      i += id[0].length;
      continue;
    }
    const op = /^(?:<>|!=|>=|<=|[=<>(),.+\-*/%;])/.exec(text.slice(i));
    if (op) {
      out.push({ t: 'op', v: op[0] === '!=' ? '<>' : op[0], at });
      i += op[0].length;
      continue;
    }
    throw new SqlError(`unexpected character '${c}' at position ${at + 1}`);
  }
  out.push({ t: 'end', at: text.length });
  return out;
}

/** Converts a LIKE pattern (% any run, _ one character) into an anchored regular expression. */
function likeToRegExp(pattern: string, escape: string | undefined): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (escape !== undefined && c === escape) {
      const next = pattern[++i];
      if (next === undefined) throw new SqlError(`LIKE pattern '${pattern}' ends with its escape character`);
      source += next.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    } else if (c === '%') source += '.*';
    else if (c === '_') source += '.';
    else source += c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}$`, 's');
}

class Parser {
  private pos = 0;
  constructor(
    private readonly tokens: Token[],
    private readonly text: string,
  ) {}

  private peek(): Token {
    return this.tokens[this.pos];
  }

  private next(): Token {
    return this.tokens[this.pos++];
  }

  private isKeyword(word: string, offset = 0): boolean {
    const tok = this.tokens[this.pos + offset];
    return tok?.t === 'id' && !tok.quoted && tok.v.toLowerCase() === word;
  }

  private isOp(op: string): boolean {
    const tok = this.peek();
    return tok.t === 'op' && tok.v === op;
  }

  private fail(message: string, tok = this.peek()): never {
    const where = tok.t === 'end' ? 'at the end' : `at position ${tok.at + 1}`;
    throw new SqlError(`${message} ${where} of "${this.text}"`);
  }

  private expectOp(op: string): void {
    if (!this.isOp(op)) this.fail(`expected '${op}'`);
    this.pos++;
  }

  private expectKeyword(word: string): void {
    if (!this.isKeyword(word)) this.fail(`expected ${word.toUpperCase()}`);
    this.pos++;
  }

  atEnd(): boolean {
    return this.peek().t === 'end';
  }

  expectEnd(): void {
    if (!this.atEnd()) this.fail('unexpected input');
  }

  predicate(): Expr {
    let left = this.conjunction();
    while (this.isKeyword('or')) {
      this.pos++;
      left = { kind: 'or', left, right: this.conjunction() };
    }
    return left;
  }

  private conjunction(): Expr {
    let left = this.negation();
    while (this.isKeyword('and')) {
      this.pos++;
      left = { kind: 'and', left, right: this.negation() };
    }
    return left;
  }

  private negation(): Expr {
    if (this.isKeyword('not')) {
      this.pos++;
      return { kind: 'not', operand: this.negation() };
    }
    return this.comparison();
  }

  private comparison(): Expr {
    if (this.isKeyword('exists')) {
      this.pos++;
      this.expectOp('(');
      const prop = this.property();
      this.expectOp(')');
      return { kind: 'exists', prop };
    }
    const left = this.additive();
    const tok = this.peek();
    if (tok.t === 'op' && ['=', '<>', '>', '>=', '<', '<='].includes(tok.v)) {
      this.pos++;
      return { kind: 'cmp', op: tok.v as '=', left, right: this.additive() };
    }
    if (this.isKeyword('is')) {
      this.pos++;
      const negated = this.isKeyword('not');
      if (negated) this.pos++;
      this.expectKeyword('null');
      return { kind: 'isnull', operand: left, negated };
    }
    const negated = this.isKeyword('not') && (this.isKeyword('in', 1) || this.isKeyword('like', 1));
    if (negated) this.pos++;
    if (this.isKeyword('in')) {
      this.pos++;
      this.expectOp('(');
      const list = [this.additive()];
      while (this.isOp(',')) {
        this.pos++;
        list.push(this.additive());
      }
      this.expectOp(')');
      return { kind: 'in', operand: left, list, negated };
    }
    if (this.isKeyword('like')) {
      this.pos++;
      const pattern = this.next();
      if (pattern.t !== 'str') this.fail('LIKE needs a string pattern', pattern);
      let escape: string | undefined;
      if (this.isKeyword('escape')) {
        this.pos++;
        const e = this.next();
        if (e.t !== 'str' || e.v.length !== 1) this.fail('ESCAPE needs a one-character string', e);
        escape = e.v;
      }
      return { kind: 'like', operand: left, pattern: likeToRegExp(pattern.v, escape), negated };
    }
    return left;
  }

  private additive(): Expr {
    let left = this.multiplicative();
    while (this.isOp('+') || this.isOp('-')) {
      const op = (this.next() as { v: string }).v as '+';
      left = { kind: 'arith', op, left, right: this.multiplicative() };
    }
    return left;
  }

  private multiplicative(): Expr {
    let left = this.unary();
    while (this.isOp('*') || this.isOp('/') || this.isOp('%')) {
      const op = (this.next() as { v: string }).v as '*';
      left = { kind: 'arith', op, left, right: this.unary() };
    }
    return left;
  }

  private unary(): Expr {
    if (this.isOp('-')) {
      this.pos++;
      return { kind: 'neg', operand: this.unary() };
    }
    if (this.isOp('+')) {
      this.pos++;
      return this.unary();
    }
    return this.primary();
  }

  private primary(): Expr {
    const tok = this.peek();
    if (tok.t === 'num' || tok.t === 'str') {
      this.pos++;
      return { kind: 'const', value: tok.v };
    }
    if (this.isOp('(')) {
      this.pos++;
      const inner = this.predicate();
      this.expectOp(')');
      return inner;
    }
    if (tok.t === 'id' && !tok.quoted) {
      const word = tok.v.toLowerCase();
      if (word === 'true' || word === 'false') {
        this.pos++;
        return { kind: 'const', value: word === 'true' };
      }
      if (word === 'null') {
        this.pos++;
        return { kind: 'const', value: null };
      }
      if (this.tokens[this.pos + 1]?.t === 'op' && (this.tokens[this.pos + 1] as { v: string }).v === '(') {
        if (word !== 'newid') this.fail(`the function ${tok.v}() is not supported by this emulator`);
        this.pos += 2;
        this.expectOp(')');
        return { kind: 'newid' };
      }
      if (keywords.has(word)) this.fail(`unexpected ${tok.v.toUpperCase()}`);
    }
    if (tok.t === 'id') return { kind: 'prop', prop: this.property() };
    return this.fail('expected a value or a property');
  }

  property(): Property {
    const first = this.next();
    if (first.t !== 'id') this.fail('expected a property name', first);
    const scope = first.quoted ? undefined : first.v.toLowerCase();
    if ((scope === 'sys' || scope === 'user') && this.isOp('.')) {
      this.pos++;
      const name = this.next();
      if (name.t !== 'id') this.fail('expected a property name', name);
      if (scope === 'sys' && !(name.v.toLowerCase() in systemProperties)) {
        this.fail(
          `sys.${name.v} is not a system property this emulator knows (${Object.keys(systemProperties).join(', ')})`,
          name,
        );
      }
      return { scope, name: name.v };
    }
    return { scope: 'user', name: first.v };
  }

  statements(): Statement[] {
    const out: Statement[] = [];
    let kind: 'set' | 'remove' | undefined;
    while (!this.atEnd()) {
      if (this.isKeyword('set') || this.isKeyword('remove')) {
        kind = (this.next() as { v: string }).v.toLowerCase() as 'set';
      } else if (!kind) {
        this.fail('expected SET or REMOVE');
      }
      const prop = this.property();
      if (kind === 'set') {
        this.expectOp('=');
        out.push({ kind: 'set', prop, value: this.additive() });
      } else {
        if (prop.scope === 'sys') this.fail(`REMOVE applies to user properties, not sys.${prop.name}`);
        out.push({ kind: 'remove', prop });
      }
      if (this.isOp(';')) {
        this.pos++;
        kind = undefined;
      } else if (this.isOp(',')) this.pos++;
      else this.expectEnd();
    }
    if (out.length === 0) this.fail('expected SET or REMOVE');
    return out;
  }
}

/** Parses a SQL filter expression; throws SqlError naming the position of the first problem. */
export function parseSqlFilter(text: string): Expr {
  const parser = new Parser(tokenize(text), text);
  if (parser.atEnd()) throw new SqlError('a SQL filter needs an expression');
  const expr = parser.predicate();
  parser.expectEnd();
  return expr;
}

/** Parses a rule action: SET and REMOVE statements, separated by ';' or ','. */
export function parseSqlAction(text: string): Statement[] {
  return new Parser(tokenize(text), text).statements();
}

function readProperty(prop: Property, m: Message): { exists: boolean; value: SqlValue } {
  if (prop.scope === 'sys') {
    const value = m[systemProperties[prop.name.toLowerCase()]] as unknown;
    return { exists: value !== undefined && value !== null, value: toSql(value) };
  }
  const props = m.application_properties ?? {};
  if (!Object.prototype.hasOwnProperty.call(props, prop.name)) return { exists: false, value: undefined };
  return { exists: true, value: toSql(plainValue(props[prop.name])) };
}

function toSql(value: unknown): SqlValue {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return value;
  if (typeof value === 'bigint') return Number(value);
  if (value instanceof Date) return value.getTime();
  if (Buffer.isBuffer(value)) return value.toString('hex');
  return String(value);
}

const unknown = undefined;

function value(e: Expr, m: Message): SqlValue {
  switch (e.kind) {
    case 'const':
      return e.value;
    case 'prop': {
      const { value: v } = readProperty(e.prop, m);
      return v === null ? unknown : v;
    }
    case 'newid':
      return randomUUID();
    case 'neg': {
      const v = value(e.operand, m);
      return typeof v === 'number' ? -v : unknown;
    }
    case 'arith': {
      const l = value(e.left, m);
      const r = value(e.right, m);
      if (e.op === '+' && typeof l === 'string' && typeof r === 'string') return l + r;
      if (typeof l !== 'number' || typeof r !== 'number') return unknown;
      switch (e.op) {
        case '+':
          return l + r;
        case '-':
          return l - r;
        case '*':
          return l * r;
        case '/':
          return r === 0 ? unknown : l / r;
        case '%':
          return r === 0 ? unknown : l % r;
      }
      return unknown;
    }
    default:
      return truth(e, m);
  }
}

function compare(op: string, l: SqlValue, r: SqlValue): boolean | undefined {
  if (l === unknown || r === unknown || l === null || r === null) return unknown;
  if (typeof l !== typeof r) return unknown;
  if (typeof l === 'boolean' && op !== '=' && op !== '<>') return unknown;
  switch (op) {
    case '=':
      return l === r;
    case '<>':
      return l !== r;
    case '>':
      return l > r;
    case '>=':
      return l >= r;
    case '<':
      return l < r;
    case '<=':
      return l <= r;
  }
  return unknown;
}

/** Three-valued truth: true, false, or undefined for unknown. */
function truth(e: Expr, m: Message): boolean | undefined {
  switch (e.kind) {
    case 'cmp':
      return compare(e.op, value(e.left, m), value(e.right, m));
    case 'and': {
      const l = truth(e.left, m);
      if (l === false) return false;
      const r = truth(e.right, m);
      if (r === false) return false;
      return l === true && r === true ? true : unknown;
    }
    case 'or': {
      const l = truth(e.left, m);
      if (l === true) return true;
      const r = truth(e.right, m);
      if (r === true) return true;
      return l === false && r === false ? false : unknown;
    }
    case 'not': {
      const v = truth(e.operand, m);
      return v === unknown ? unknown : !v;
    }
    case 'isnull': {
      const v = value(e.operand, m);
      const isNull = v === unknown || v === null;
      return e.negated ? !isNull : isNull;
    }
    case 'exists':
      return readProperty(e.prop, m).exists;
    case 'in': {
      const v = value(e.operand, m);
      if (v === unknown || v === null) return unknown;
      let sawUnknown = false;
      for (const item of e.list) {
        const hit = compare('=', v, value(item, m));
        if (hit === true) return !e.negated;
        if (hit === unknown) sawUnknown = true;
      }
      return sawUnknown ? unknown : e.negated;
    }
    case 'like': {
      const v = value(e.operand, m);
      if (typeof v !== 'string') return unknown;
      const hit = e.pattern.test(v);
      return e.negated ? !hit : hit;
    }
    default: {
      const v = value(e, m);
      return typeof v === 'boolean' ? v : unknown;
    }
  }
}

/** True when the filter is true for the message (unknown does not match). */
export function sqlMatches(filter: Expr, m: Message): boolean {
  return truth(filter, m) === true;
}

/** Applies a rule action to a subscription's copy of the message. */
export function applySqlAction(statements: Statement[], m: Message): void {
  for (const s of statements) {
    if (s.kind === 'remove') {
      if (m.application_properties) delete m.application_properties[s.prop.name];
      continue;
    }
    const v = value(s.value, m);
    if (s.prop.scope === 'sys') {
      (m as unknown as Record<string, unknown>)[systemProperties[s.prop.name.toLowerCase()]] =
        v === unknown || v === null ? undefined : String(v);
    } else {
      m.application_properties = { ...(m.application_properties ?? {}), [s.prop.name]: v ?? null };
    }
  }
}
