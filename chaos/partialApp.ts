import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A temporary function-app root that loads this repo's compiled functions except the ones named:
 * one stub file per function that requires the compiled file, so the registrations are the real
 * ones. scheduler-backlog runs the stack on it to have every part running except the Scheduler.
 */
export function writeAppRootWithout(repoRoot: string, without: readonly string[]): string {
  const functionsDir = join(repoRoot, 'dist', 'functions');
  const files = readdirSync(functionsDir).filter((f) => f.endsWith('.js'));
  const kept = files.filter((f) => !without.includes(f.replace(/\.js$/, '')));
  if (kept.length !== files.length - without.length) {
    throw new Error(`dist/functions lacks one of ${without.join(', ')}: did you build?`);
  }
  const root = mkdtempSync(join(tmpdir(), 'chaos-partial-app-'));
  mkdirSync(join(root, 'fns'));
  for (const f of kept) {
    writeFileSync(join(root, 'fns', f), `require(${JSON.stringify(join(functionsDir, f))});\n`);
  }
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(root, 'package.json'), JSON.stringify({ ...pkg, main: 'fns/*.js' }, null, 2));
  writeFileSync(join(root, 'host.json'), readFileSync(join(repoRoot, 'host.json')));
  mkdirSync(join(root, 'infra', 'servicebus-emulator'), { recursive: true });
  writeFileSync(
    join(root, 'infra', 'servicebus-emulator', 'Config.json'),
    readFileSync(join(repoRoot, 'infra', 'servicebus-emulator', 'Config.json')),
  );
  return root;
}
