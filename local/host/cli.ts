import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startLocalHost, type LocalHost } from './index.js';
import { readLocalSettings } from './settings.js';

/** The line a parent process waits for (see spawnLocalHost); the JSON after it describes the host. */
export const readyMarker = 'LOCAL_HOST_READY';

interface CliArgs {
  app: string;
  port: number | undefined;
  host: string | undefined;
  graceMs: number | undefined;
}

function usage(): never {
  process.stderr.write(
    'usage: node dist/local/host/cli.js [--app <root>] [--port 7071] [--host 127.0.0.1] [--grace-ms 30000]\n',
  );
  process.exit(2);
}

function parseArgs(argv: string[]): CliArgs {
  const args: CliArgs = { app: process.cwd(), port: undefined, host: undefined, graceMs: undefined };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (flag === '--help' || flag === '-h') usage();
    if (value === undefined) usage();
    const number = (): number => {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 0) {
        process.stderr.write(`${flag} needs a non-negative integer, got "${value}"\n`);
        process.exit(2);
      }
      return n;
    };
    if (flag === '--app') args.app = resolve(value);
    else if (flag === '--port') args.port = number();
    else if (flag === '--host') args.host = value;
    else if (flag === '--grace-ms') args.graceMs = number();
    else usage();
    i++;
  }
  return args;
}

/** `Host.LocalHttpPort` from local.settings.json, as `func start` uses it. */
function localHttpPort(appRoot: string): number | undefined {
  const file = join(appRoot, 'local.settings.json');
  if (!existsSync(file)) return undefined;
  const port = (JSON.parse(readFileSync(file, 'utf8')) as { Host?: { LocalHttpPort?: unknown } }).Host
    ?.LocalHttpPort;
  return typeof port === 'number' ? port : undefined;
}

function readinessBlock(host: LocalHost): string {
  const lines = ['', 'Functions:', ''];
  for (const fn of host.functions) {
    const auth = fn.authLevel && fn.authLevel !== 'anonymous' ? ` (authLevel: ${fn.authLevel})` : '';
    // The reason is in the warning logged above; the list only says so.
    const notRun = fn.notRun !== undefined && fn.trigger === 'http' ? ' (not run: answers 501)' : '';
    lines.push(`        ${fn.name}: ${fn.trigger} ${fn.detail}${auth}${notRun}`);
  }
  lines.push('', `Function key (x-functions-key header or ?code=): ${host.functionKey}`);
  lines.push(
    `Operator key (Authorization: Bearer header; signs in as ${host.operatorName}): ${host.operatorKey}`,
    '',
  );
  lines.push(
    `${readyMarker} ${JSON.stringify({ httpPort: host.httpPort, baseUrl: host.baseUrl, functionKey: host.functionKey, operatorKey: host.operatorKey, functions: host.functions })}`,
  );
  return lines.join('\n');
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const env = readLocalSettings(args.app, process.env);
  const host = await startLocalHost({
    appRoot: args.app,
    env,
    httpPort: args.port ?? localHttpPort(args.app) ?? 7071,
    host: args.host,
    shutdownGraceMs: args.graceMs,
  });
  process.stdout.write(`${readinessBlock(host)}\n`);

  let signalled = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled) {
      process.stderr.write(`${signal} again: exiting without waiting.\n`);
      process.exit(1);
    }
    signalled = true;
    host.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`Shutdown failed: ${(err as Error).stack ?? String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

main().catch((err: unknown) => {
  process.stderr.write(`Local host failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
