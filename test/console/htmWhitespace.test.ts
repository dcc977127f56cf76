import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

/**
 * htm drops whitespace that holds a line break where text meets an expression or a tag, so
 *
 *     html`<p>Oldest: <a>…</a>,
 *            ${age} of its ${bound}
 *            bound</p>`
 *
 * renders "Oldest: 1a2b3c4d,12 s of its 60 sbound". Written text must keep its spaces on one line
 * or say `${' '}`. This reads every `html` template in the console's sources with the TypeScript
 * parser and names each place where a line break stands between words and an expression or an
 * inline element.
 */
// Compiled to dist/test/console; the sources live at the repository root.
const root = resolve(__dirname, '..', '..', '..');
const inline = '(?:a|abbr|b|code|em|i|kbd|small|span|strong|time)';
const word = '[\\p{L}\\p{N}(–]';

/** The static parts of each html`…` template in a source, in order, with their line. */
function templates(source: string, name = 'x.ts'): Array<{ line: number; parts: string[] }> {
  const file = ts.createSourceFile(name, source, ts.ScriptTarget.Latest, true);
  const found: Array<{ line: number; parts: string[] }> = [];
  const visit = (node: ts.Node): void => {
    if (ts.isTaggedTemplateExpression(node) && node.tag.getText(file) === 'html') {
      const t = node.template;
      const parts = ts.isNoSubstitutionTemplateLiteral(t)
        ? [t.rawText ?? t.text]
        : [t.head.rawText ?? t.head.text, ...t.templateSpans.map((s) => s.literal.rawText ?? s.literal.text)];
      found.push({ line: file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1, parts });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/**
 * A template's static parts joined with a mark for each expression: TEXT_HOLE where it stands in
 * text (its value is rendered), TAG_HOLE inside a tag (an attribute or a component's name).
 */
const TEXT_HOLE = '\u0001';
const TAG_HOLE = '\u0002';
function joined(parts: string[]): string {
  let out = '';
  let inTag = false;
  let quote: string | null = null;
  parts.forEach((part, i) => {
    if (i > 0) out += inTag ? TAG_HOLE : TEXT_HOLE;
    for (let c = 0; c < part.length; c++) {
      const ch = part[c]!;
      if (inTag) {
        if (quote) quote = ch === quote ? null : quote;
        else if (ch === '"' || ch === "'") quote = ch;
        else if (ch === '>') inTag = false;
      } else if (
        ch === '<' &&
        (c + 1 < part.length ? /[\p{L}/!]/u.test(part[c + 1]!) : i < parts.length - 1)
      ) {
        inTag = true;
      }
      out += ch;
    }
  });
  return out;
}

const glue: Array<[string, RegExp]> = [
  ['text after an expression', new RegExp(`${TEXT_HOLE}[ \\t]*\\n\\s*${word}`, 'gu')],
  ['text before an expression', new RegExp(`[^\\s>${TEXT_HOLE}][ \\t]*\\n\\s*${TEXT_HOLE}`, 'gu')],
  ['text after an inline element', new RegExp(`</${inline}>[ \\t]*\\n\\s*${word}`, 'gu')],
  [
    'text before an inline element',
    new RegExp(`[\\p{L}\\p{N},.:;)][ \\t]*\\n\\s*<(?:${inline}|${TAG_HOLE})`, 'gu'),
  ],
];

/** Where a line break would glue text to its neighbour, described for the failure message. */
export function gluedText(source: string, name?: string): string[] {
  const glued: string[] = [];
  for (const { line, parts } of templates(source, name)) {
    const text = joined(parts);
    for (const [what, pattern] of glue) {
      for (const m of text.matchAll(pattern))
        glued.push(
          `template at line ${line}: ${what}: ${JSON.stringify(m[0].replaceAll(TEXT_HOLE, '${…}').replaceAll(TAG_HOLE, '${…}'))}`,
        );
    }
  }
  return glued;
}

test('the check finds text glued by a line break, and passes text kept on its line', () => {
  const broken = [
    'html`<p>Oldest: <a>${id}</a>,\n    ${age} of its ${bound}\n    bound</p>`',
    'html`<p>${n}\n    orders</p>`',
    'html`<p>See\n    <a href="x">it</a></p>`',
    'html`<p><code>x</code>\n    here</p>`',
  ];
  assert.deepEqual(
    broken.map((s) => gluedText(s).length),
    [2, 1, 1, 1],
    broken.map((s) => gluedText(s).join('; ')).join('\n'),
  );
  const fine = [
    'html`<p>Oldest: <a>${id}</a>, ${age} of its ${bound} bound</p>`',
    'html`<tr>\n  <td>${a}</td>\n  <td>${b}</td>\n</tr>`',
    'html`<p>\n  ${text}\n</p>`',
  ];
  assert.deepEqual(
    fine.map((s) => gluedText(s)),
    [[], [], []],
  );
});

test('no console template glues words by a line break (htm drops it)', () => {
  const dir = join(root, 'console', 'src');
  const glued = readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .flatMap((f) => gluedText(readFileSync(join(dir, f), 'utf8'), f).map((g) => `${f} ${g}`));
  assert.deepEqual(glued, []);
});
