/**
 * shared/domain holds the rules and nothing else: it may import only its own modules (and a pure
 * hash from node:crypto), never an Azure SDK, the messaging or storage adapters, or the network.
 * The sources are read as text, import and export-from specifiers alike, dynamic import() too.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = resolve(__dirname, '..', '..', '..');
const domainDir = join(root, 'shared', 'domain');
/** Node built-ins the domain may use: pure functions, no I/O. */
const allowedBuiltIns = new Set(['node:crypto']);

interface Source {
  path: string;
  text: string;
}

function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]/g))
    found.push(m[1]);
  for (const m of text.matchAll(/(?:^|[\s;])import\s*['"]([^'"]+)['"]/g)) found.push(m[1]);
  for (const m of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push(m[1]);
  for (const m of text.matchAll(/\brequire\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push(m[1]);
  return found;
}

/** What each file imports from outside shared/domain, as `file: specifier (why)`. */
export function importsOutsideDomain(files: Source[], dir: string): string[] {
  const problems: string[] = [];
  for (const f of files) {
    for (const spec of specifiers(f.text)) {
      const where = `${relative(root, f.path).split(sep).join('/')} imports '${spec}'`;
      if (spec.startsWith('.')) {
        const target = resolve(dirname(f.path), spec);
        if (target !== dir && !target.startsWith(dir + sep)) problems.push(`${where}: outside shared/domain`);
      } else if (spec.startsWith('@azure/')) {
        problems.push(`${where}: an Azure SDK`);
      } else if (!allowedBuiltIns.has(spec)) {
        problems.push(`${where}: not a shared/domain module`);
      }
    }
  }
  return problems;
}

const sources: Source[] = readdirSync(domainDir)
  .filter((n) => n.endsWith('.ts'))
  .map((n) => ({ path: join(domainDir, n), text: readFileSync(join(domainDir, n), 'utf8') }));

test('shared/domain imports nothing outside shared/domain and no Azure SDK', () => {
  assert.ok(sources.length > 10, `read ${sources.length} domain sources`);
  assert.deepEqual(importsOutsideDomain(sources, domainDir), []);
});

test('the check catches adapter imports, Azure SDKs, packages and dynamic imports', () => {
  const at = (name: string, text: string): Source => ({ path: join(domainDir, name), text });
  const problems = importsOutsideDomain(
    [
      at('a.ts', "import { queues } from '../messaging/entities.js';"),
      at('b.ts', "import type { TableClient } from '@azure/data-tables';"),
      at('c.ts', "export { z } from 'zod';"),
      at('d.ts', "const m = await import('../stateStore/stateStore.js');"),
      at('e.ts', "import { readFileSync } from 'node:fs';"),
      at('f.ts', "import { x } from './workflow.js';\nimport { createHash } from 'node:crypto';"),
    ],
    domainDir,
  );
  assert.equal(problems.length, 5, JSON.stringify(problems));
  assert.match(problems[0], /a\.ts imports '\.\.\/messaging\/entities\.js': outside shared\/domain/);
  assert.match(problems[1], /Azure SDK/);
  assert.match(problems[2], /'zod': not a shared\/domain module/);
  assert.match(problems[3], /stateStore/);
  assert.match(problems[4], /node:fs/);
});
