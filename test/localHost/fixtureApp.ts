import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

/** The compiled fixture functions (this file compiles next to them under dist/test/localHost). */
export const fixtureDist = join(__dirname, 'fixtures', 'app');

/** App roots this test process wrote, removed when it exits (a full test run left 23 behind). */
const written: string[] = [];
process.once('exit', () => {
  for (const root of written) rmSync(root, { recursive: true, force: true });
});

/**
 * Writes an app root in a temp folder whose package.json `main` globs some of the compiled fixture
 * files, like a real app's `dist/functions/*.js`. The folder goes when the test process exits.
 */
export function writeFixtureApp(options: {
  files: string;
  hostJson?: Record<string, unknown>;
  localSettings?: Record<string, unknown>;
}): string {
  const root = mkdtempSync(join(tmpdir(), 'local-host-app-'));
  written.push(root);
  const main = `${relative(root, fixtureDist).split('\\').join('/')}/${options.files}`;
  writeFileSync(
    join(root, 'package.json'),
    JSON.stringify({ name: 'fixture-app', version: '1.0.0', main }, null, 2),
  );
  writeFileSync(join(root, 'host.json'), JSON.stringify(options.hostJson ?? { version: '2.0' }, null, 2));
  if (options.localSettings) {
    writeFileSync(join(root, 'local.settings.json'), JSON.stringify(options.localSettings, null, 2));
  }
  return root;
}

/** Waits for a condition with a generous deadline instead of asserting a duration. */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
