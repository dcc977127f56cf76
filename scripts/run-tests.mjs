// Runs the compiled tests with node's own test runner.
// Usage: node scripts/run-tests.mjs [folder or compiled test file under dist/, as a repo path ...]
// The runner is given the file list (no globs) so a folder or file argument selects exactly that.
import { readdirSync, statSync, existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { spawnSync } from 'node:child_process';

const root = process.cwd();
const dist = join(root, 'dist');
if (!existsSync(dist)) {
  console.error('dist/ is missing: run `npm run build` first.');
  process.exit(2);
}
const folders = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const passThrough = process.argv.slice(2).filter((a) => a.startsWith('--'));
const roots = folders.length ? folders.map((f) => join(dist, f)) : [dist];

function walk(dir, out) {
  if (!existsSync(dir)) return out;
  if (!statSync(dir).isDirectory()) {
    if (dir.endsWith('.test.js')) out.push(dir);
    return out;
  }
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) walk(full, out);
    else if (name.endsWith('.test.js')) out.push(full);
  }
  return out;
}
const files = roots.flatMap((r) => walk(r, [])).sort();
if (files.length === 0) {
  console.error(`no test files under ${roots.map((r) => relative(root, r)).join(', ')}`);
  process.exit(1);
}
const concurrency = process.env.TEST_CONCURRENCY ?? '2';
const result = spawnSync(
  process.execPath,
  ['--enable-source-maps', '--test', `--test-concurrency=${concurrency}`, ...passThrough, ...files],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
