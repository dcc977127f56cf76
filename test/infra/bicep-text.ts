/**
 * Just enough Bicep reading for drift checks: no Bicep CLI runs here, so the tests read the
 * files as text. Handles single-quoted strings (with \' escapes) and // and block comments;
 * multi-line ''' strings and quotes nested inside ${} interpolation are not used in infra/.
 */

/** The text with comments blanked out (string contents kept), so offsets stay the same. */
export function stripComments(text: string): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "'") {
      const end = stringEnd(text, i);
      out += text.slice(i, end);
      i = end;
    } else if (c === '/' && text[i + 1] === '/') {
      while (i < text.length && text[i] !== '\n') {
        out += ' ';
        i++;
      }
    } else if (c === '/' && text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2);
      const end = close === -1 ? text.length : close + 2;
      out += text.slice(i, end).replace(/[^\n]/g, ' ');
      i = end;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** Index just past the string literal that opens at `start`. */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length) {
    if (text[i] === '\\') i += 2;
    else if (text[i] === "'") return i + 1;
    else i++;
  }
  return text.length;
}

/** Index of the bracket that closes the one at `open` (`{` or `[`). */
export function matchingBracket(text: string, open: number): number {
  const pairs: Record<string, string> = { '{': '}', '[': ']' };
  const stack: string[] = [];
  let i = open;
  while (i < text.length) {
    const c = text[i];
    if (c === "'") {
      i = stringEnd(text, i);
      continue;
    }
    if (c in pairs) stack.push(pairs[c]);
    else if (c === '}' || c === ']') {
      if (stack.pop() !== c) throw new Error(`unbalanced ${c} at ${i}`);
      if (stack.length === 0) return i;
    }
    i++;
  }
  throw new Error(`no closing bracket for ${text[open]} at ${open}`);
}

export interface ResourceDecl {
  symbol: string;
  /** Full type for top-level declarations, the child segment for nested ones. */
  type: string;
  apiVersion?: string;
  existing: boolean;
  /** Loop variable and the expression looped over, for `[for x in expr: {...}]`. */
  loop?: { variable: string; source: string };
  /** The object body between (and including) its braces. */
  body: string;
}

const resourceHead =
  /resource\s+(\w+)\s+'([^'@]+)(?:@([^']+))?'\s*(existing\s*)?=\s*(\[\s*for\s+\(?\s*(\w+)[^)]*?\)?\s+in\s+([^:]+?)\s*:\s*)?(if\s*\([^{]*\)\s*)?\{/g;

/** Every `resource` declaration in a (comment-stripped) Bicep text, nested ones included. */
export function resources(text: string): ResourceDecl[] {
  const found: ResourceDecl[] = [];
  for (const m of text.matchAll(resourceHead)) {
    const open = (m.index ?? 0) + m[0].length - 1;
    const close = matchingBracket(text, open);
    found.push({
      symbol: m[1],
      type: m[2],
      apiVersion: m[3],
      existing: Boolean(m[4]),
      loop: m[5] ? { variable: m[6], source: m[7].trim() } : undefined,
      body: text.slice(open, close + 1),
    });
  }
  return found;
}

/** The `{...}` or `[...]` value assigned to `var name` (or a top-level property `name:`). */
export function valueOf(text: string, name: string): string | undefined {
  const m = new RegExp(`(?:^|\\n)\\s*(?:var\\s+)?${name}\\s*[:=]\\s*([[{])`).exec(text);
  if (!m) return undefined;
  const open = m.index + m[0].length - 1;
  return text.slice(open, matchingBracket(text, open) + 1);
}

/** Keys at the top level of an object body `{ key: value ... }`. */
export function topLevelKeys(body: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  let i = 0;
  let lineStart = true;
  while (i < body.length) {
    const c = body[i];
    if (c === "'") {
      i = stringEnd(body, i);
      lineStart = false;
      continue;
    }
    if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
    else if (c === '\n') {
      lineStart = true;
      i++;
      continue;
    }
    if (lineStart && depth === 1 && /[A-Za-z_]/.test(c)) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)\s*:/.exec(body.slice(i));
      if (m) keys.push(m[1]);
    }
    if (!/\s/.test(c)) lineStart = false;
    i++;
  }
  return keys;
}

/** All single-quoted string literals in a text, unescaped. */
export function stringLiterals(text: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] === "'") {
      const end = stringEnd(text, i);
      out.push(text.slice(i + 1, end - 1).replace(/\\'/g, "'"));
      i = end;
    } else i++;
  }
  return out;
}
