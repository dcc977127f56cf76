import { spawn } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { startAzurite, type AzuriteInstance } from './azurite.js';
import { startRemoteServices } from './remoteServices/index.js';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../emulators/servicebus/index.js';
import { assertPortFree, PortBusyError } from './ports.js';
import { defaultPorts, localAppSettings, serviceUrlSettings } from './stack.js';
import { remoteServiceNames, type RemoteServiceName } from '../shared/agents/remoteOperations.js';

/**
 * `npm run start:func`: the same app under Azure Functions Core Tools (`func start`) instead of
 * the local host. Starts Azurite on its standard ports (so `UseDevelopmentStorage=true` works),
 * the Service Bus emulator on 5672 and the demo remote services on 7101-7103, writes
 * local.settings.json from local.settings.sample.json if there is none, runs `func start` with
 * the terminal attached, and stops the services when func exits.
 *
 * NOT RUN HERE: the machine this was written on has no Core Tools. What is tested: the message
 * when `func` is missing, and the local.settings.json it writes. `func start` needs Core Tools v4
 * (https://learn.microsoft.com/azure/azure-functions/functions-run-local) and, like the local
 * host, `npm run build` first (the npm script does it).
 */

const repoRoot = resolve(__dirname, '..', '..');

export const funcMissingMessage = `Azure Functions Core Tools (the \`func\` command) is not on PATH.
Install Core Tools v4, e.g.:
  npm install -g azure-functions-core-tools@4 --unsafe-perm true
  (or winget/brew/apt: https://learn.microsoft.com/azure/azure-functions/functions-run-local)
or run the app without it on the bundled local host:
  npm start`;

/** The full path of an executable on PATH, or undefined (PATHEXT on Windows). */
export function findOnPath(
  name: string,
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  const exts = process.platform === 'win32' ? (env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = join(dir, name + ext);
      try {
        accessSync(candidate, constants.X_OK);
        return candidate;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

export interface FuncServices {
  storageConnectionString: string;
  serviceBusConnectionString: string;
  /** The demo service of each declared step's Agent. */
  remote: Record<RemoteServiceName, { url: string }>;
}

/**
 * Writes local.settings.json from the sample with these services' endpoints, unless one exists
 * (it is the user's file: we never overwrite it). Returns whether it was written.
 */
export function ensureLocalSettings(
  appRoot: string,
  services: FuncServices,
): { written: boolean; path: string } {
  const path = join(appRoot, 'local.settings.json');
  if (existsSync(path)) return { written: false, path };
  const sample = JSON.parse(readFileSync(join(appRoot, 'local.settings.sample.json'), 'utf8')) as {
    Values: Record<string, string>;
    Host?: Record<string, unknown>;
    [k: string]: unknown;
  };
  const { _inAzure: _ignored, ...rest } = sample;
  const settings = {
    ...rest,
    Values: {
      ...sample.Values,
      // The local stack's quicker supervision, so a hung step shows its retry within seconds.
      ...localAppSettings,
      AzureWebJobsStorage: services.storageConnectionString,
      StateStoreConnection: services.storageConnectionString,
      ServiceBusConnection: services.serviceBusConnectionString,
      ...serviceUrlSettings(services.remote),
    },
    Host: { ...sample.Host, LocalHttpPort: defaultPorts.http },
  };
  writeFileSync(path, `${JSON.stringify(settings, null, 2)}\n`);
  return { written: true, path };
}

async function main(): Promise<number> {
  const func = findOnPath('func');
  if (!func) {
    process.stderr.write(`${funcMissingMessage}\n`);
    return 1;
  }
  const p = defaultPorts;
  // func's own port (7071) is func's to report; ours are checked before anything starts.
  await assertPortFree(p.serviceBus, 'the Service Bus emulator', 'nothing (start:func uses 5672)');
  for (const [port, what] of [
    [p.blob, 'Azurite blob'],
    [p.queue, 'Azurite queue'],
    [p.table, 'Azurite table'],
    ...remoteServiceNames.map((name) => [p[name], `the ${name} service`] as const),
  ] as const) {
    await assertPortFree(
      port,
      what,
      'nothing (start:func uses the standard ports; use npm start for others)',
    );
  }

  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  };
  try {
    const azurite: AzuriteInstance = await startAzurite({
      services: ['blob', 'queue', 'table'],
      location: join(repoRoot, '.data', 'azurite'),
      ports: { blob: p.blob, queue: p.queue, table: p.table },
    });
    stops.push(() => azurite.stop());
    const bus: ServiceBusEmulator = await startServiceBusEmulator({
      config: join(repoRoot, 'infra', 'servicebus-emulator', 'Config.json'),
      port: p.serviceBus,
    });
    stops.push(() => bus.stop());
    const remote = await startRemoteServices({
      ports: Object.fromEntries(remoteServiceNames.map((name) => [name, p[name]])),
    });
    stops.push(() => remote.stop());

    const settings = ensureLocalSettings(repoRoot, {
      storageConnectionString: azurite.connectionString,
      serviceBusConnectionString: bus.connectionString,
      remote,
    });
    process.stdout.write(
      `Azurite, the Service Bus emulator (${bus.connectionString}) and the demo services are up.\n` +
        `${settings.written ? 'Wrote' : 'Using your'} ${settings.path}.\nStarting: ${func} start\n\n`,
    );
    const child = spawn(func, ['start'], { cwd: repoRoot, stdio: 'inherit' });
    // func gets the terminal's Ctrl-C itself; we only wait for it, then stop our services.
    const ignore = () => undefined;
    process.on('SIGINT', ignore);
    process.on('SIGTERM', () => child.kill('SIGTERM'));
    const code = await new Promise<number>((resolveExit) => {
      child.once('error', (e) => {
        process.stderr.write(`could not run ${func}: ${e.message}\n`);
        resolveExit(1);
      });
      child.once('exit', (c) => resolveExit(c ?? 0));
    });
    await stopAll();
    return code;
  } catch (e) {
    await stopAll();
    throw e;
  }
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (e: unknown) => {
      const message = e instanceof PortBusyError ? e.message : `could not start: ${(e as Error).message}`;
      process.stderr.write(`start:func: ${message}\n`);
      process.exit(1);
    },
  );
}
