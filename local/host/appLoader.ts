import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';

/**
 * The files the host loads for an app: package.json `main`, a path or a glob, relative to the
 * app root (`*`, `?` and `**` as in the Node worker's glob). Sorted, so load order is stable.
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
  const files = /[*?]/.test(pattern) ? expandGlob(appRoot, pattern) : [resolveMain(appRoot, pattern)];
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

function segmentRegex(segment: string): RegExp {
  const body = segment
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '[^/]*')
    .replace(/\?/g, '[^/]');
  return new RegExp(`^${body}$`);
}

function expandGlob(appRoot: string, pattern: string): string[] {
  const segments = pattern.replace(/\\/g, '/').replace(/^\.\//, '').split('/').filter(Boolean);
  const out = new Set<string>();
  const walk = (dir: string, index: number): void => {
    if (index === segments.length) {
      if (existsSync(dir) && statSync(dir).isFile()) out.add(dir);
      return;
    }
    const segment = segments[index];
    if (segment === '**') {
      walk(dir, index + 1);
      for (const name of safeList(dir)) {
        const full = join(dir, name);
        if (statSync(full).isDirectory() && name !== 'node_modules') walk(full, index);
      }
      return;
    }
    if (!/[*?]/.test(segment)) {
      walk(join(dir, segment), index + 1);
      return;
    }
    const regex = segmentRegex(segment);
    for (const name of safeList(dir)) {
      if (regex.test(name)) walk(join(dir, name), index + 1);
    }
  };
  walk(isAbsolute(pattern) ? '/' : resolve(appRoot), 0);
  return [...out].sort();
}

function safeList(dir: string): string[] {
  try {
    return statSync(dir).isDirectory() ? readdirSync(dir) : [];
  } catch {
    return [];
  }
}
