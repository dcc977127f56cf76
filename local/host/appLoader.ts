import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { globSync, hasMagic } from 'glob';

/**
 * The files the host loads for an app: package.json `main`, a path or a glob relative to the app
 * root, expanded by the same glob library the Node worker uses (so `{a,b}`, `*`, `?`, `**` and
 * classes mean what they mean in Azure). Sorted, so load order is stable.
 */
export function resolveEntryFiles(appRoot: string): string[] {
  const packageFile = join(appRoot, 'package.json');
  if (!existsSync(packageFile))
    throw new Error(`${packageFile} is missing: the app root needs a package.json.`);
  const pkg = JSON.parse(readFileSync(packageFile, 'utf8')) as { main?: unknown };
  if (typeof pkg.main !== 'string' || pkg.main.trim() === '') {
    throw new Error(
      `${packageFile} has no "main": set it to the compiled functions, e.g. "dist/functions/*.js".`,
    );
  }
  const pattern = pkg.main.trim();
  const files = hasMagic(pattern, { magicalBraces: true, windowsPathsNoEscape: true })
    ? globSync(pattern, { cwd: appRoot, absolute: true, nodir: true, windowsPathsNoEscape: true }).sort()
    : [resolveMain(appRoot, pattern)];
  if (files.length === 0) {
    throw new Error(
      `package.json "main" (${pattern}) matches no file under ${appRoot}: did you build the app?`,
    );
  }
  return files;
}

function resolveMain(appRoot: string, main: string): string {
  const full = isAbsolute(main) ? main : resolve(appRoot, main);
  for (const candidate of [full, `${full}.js`, join(full, 'index.js')]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  throw new Error(`package.json "main" (${main}) does not exist under ${appRoot}: did you build the app?`);
}
