import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Starts Azurite from node_modules as a child process, on free loopback ports, and stops it.
 * Used by tests (in memory) and by the local stack (with a data folder).
 *
 * Ports: by default each service listens on port 0 and we read the port the OS gave it from
 * Azurite's "successfully listening at" line, so there is no window in which another process
 * can take a port we probed (no EADDRINUSE race to retry).
 */
export type AzuriteService = 'blob' | 'queue' | 'table';

export interface AzuriteOptions {
  services?: AzuriteService[];
  /** Data folder; in-memory persistence when absent. */
  location?: string;
  ports?: Partial<Record<AzuriteService, number>>;
  host?: '127.0.0.1';
  /** How long to wait for Azurite to listen. */
  startTimeoutMs?: number;
  /**
   * Run in its own process group, so a terminal's Ctrl-C reaches only the parent, which then
   * stops Azurite after the functions host (npm start). The exit hook still kills it.
   */
  ownProcessGroup?: boolean;
  /**
   * Storage accounts beside devstoreaccount1 (AZURITE_ACCOUNTS, same well-known key), so one
   * Azurite serves a state store spread over several accounts (StateStoreAccounts).
   */
  extraAccounts?: string[];
}

export interface AzuriteInstance {
  tableUrl: string;
  blobUrl?: string;
  queueUrl?: string;
  /** Full development-storage connection string naming the actual endpoints. */
  connectionString: string;
  /** The table connection string of an account this Azurite serves (devstoreaccount1 or an extra one). */
  tableConnectionString(account: string): string;
  pid: number;
  /** What Azurite printed, its last 16 KiB: for the message of a caller that finds it failed. */
  recentOutput(): string;
  stop(): Promise<void>;
}

export const devAccountName = 'devstoreaccount1';
// Azurite's well-known development account key (public, documented by Microsoft).
export const devAccountKey =
  'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/** Kill children when this process goes away, so a killed test run leaves no Azurite behind. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  const killAll = (): void => {
    for (const child of live) child.kill('SIGKILL');
  };
  process.on('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      // A program with its own shutdown (npm start) stops Azurite itself, in order.
      if (process.listenerCount(signal) > 0) return;
      killAll();
      process.exit(128 + (signal === 'SIGINT' ? 2 : signal === 'SIGTERM' ? 15 : 1));
    });
  }
}

/**
 * The all-in-one entry point, even for tables only: it is the one that logs the port the OS
 * actually assigned (the single-service entry points echo the configured 0).
 */
function azuriteEntry(): string {
  const pkg = require.resolve('azurite/package.json');
  return join(pkg.slice(0, -'package.json'.length), 'dist/src/azurite.js');
}

/**
 * How long Azurite keeps an idle connection (its default is 5 s). A Node 24 server accepts one
 * new connection per turn of its event loop (libuv 1.52; strace of the staged bench: one accept4
 * every 150-350 ms with 35-87 connections queued), so under load a client's new connection
 * waited 6-20 s while its open ones were served at once: a renewal of a call budget's lease on a
 * new connection missed its lease. Clients that keep their connections open skip that queue.
 */
export const azuriteKeepAliveSeconds = 120;

/** How much of Azurite's console a running instance keeps (recentOutput). */
const keptOutputChars = 16 * 1024;

export async function startAzurite(options: AzuriteOptions = {}): Promise<AzuriteInstance> {
  const services = [...(options.services ?? ['table'])];
  if (!services.includes('table')) services.push('table');
  const host = options.host ?? '127.0.0.1';
  const scratch = options.location ? undefined : mkdtempSync(join(tmpdir(), 'azurite-'));
  const entry = azuriteEntry();
  // --silent: no access-log line per request (formatting and piping one per request costs
  // Azurite CPU, and nothing reads them).
  const args = [
    entry,
    '--skipApiVersionCheck',
    '--loose',
    '--disableProductStyleUrl',
    '--disableTelemetry',
    '--silent',
  ];
  // In memory, Azurite refuses --location; the scratch folder is only its working directory.
  if (options.location) args.push('--location', options.location);
  else args.push('--inMemoryPersistence');
  for (const s of ['blob', 'queue', 'table'] as const) {
    args.push(`--${s}Host`, host, `--${s}Port`, String(options.ports?.[s] ?? 0));
    args.push(`--${s}KeepAliveTimeout`, String(azuriteKeepAliveSeconds));
  }

  installExitHook();
  const child = spawn(process.execPath, args, {
    cwd: options.location ?? scratch,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.ownProcessGroup ?? false,
    // Azurite serves only the listed accounts once any is listed: the development one comes first.
    ...(options.extraAccounts?.length
      ? {
          env: {
            ...process.env,
            AZURITE_ACCOUNTS: [devAccountName, ...options.extraAccounts]
              .map((a) => `${a}:${devAccountKey}`)
              .join(';'),
          },
        }
      : {}),
  });
  live.add(child);

  const cleanup = (): void => {
    live.delete(child);
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  };

  let output = '';
  const urls: Partial<Record<AzuriteService, string>> = {};
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(`Azurite did not start within ${options.startTimeoutMs ?? 30_000} ms:\n${output}`),
          ),
        options.startTimeoutMs ?? 30_000,
      );
      const onData = (chunk: Buffer): void => {
        output += chunk.toString();
        for (const m of output.matchAll(
          /Azurite (Blob|Queue|Table) service is successfully listening at (\S+)/g,
        )) {
          urls[m[1].toLowerCase() as AzuriteService] = m[2].replace(/\/+$/, '');
        }
        if (Object.keys(urls).length === 3) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`Azurite exited (${code ?? signal}) before listening:\n${output}`));
      });
      child.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
  } catch (e) {
    child.kill('SIGKILL');
    cleanup();
    throw e;
  }
  // Keep draining output so a chatty Azurite never blocks on a full pipe, but keep only its tail:
  // the start-up search ran over everything printed so far on every chunk, quadratic over a run.
  for (const stream of [child.stdout!, child.stderr!]) {
    stream.removeAllListeners('data');
    stream.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-keptOutputChars);
    });
  }
  output = output.slice(-keptOutputChars);

  const tableUrl = `${urls.table}/${devAccountName}`;
  const blobUrl = services.includes('blob') && urls.blob ? `${urls.blob}/${devAccountName}` : undefined;
  const queueUrl = services.includes('queue') && urls.queue ? `${urls.queue}/${devAccountName}` : undefined;
  const parts = [
    'DefaultEndpointsProtocol=http',
    `AccountName=${devAccountName}`,
    `AccountKey=${devAccountKey}`,
    blobUrl && `BlobEndpoint=${blobUrl}`,
    queueUrl && `QueueEndpoint=${queueUrl}`,
    `TableEndpoint=${tableUrl}`,
  ].filter(Boolean);

  let stopped: Promise<void> | undefined;
  return {
    tableUrl,
    blobUrl,
    queueUrl,
    connectionString: parts.join(';') + ';',
    tableConnectionString: (account) =>
      `DefaultEndpointsProtocol=http;AccountName=${account};AccountKey=${devAccountKey};TableEndpoint=${urls.table}/${account};`,
    pid: child.pid!,
    recentOutput: () => output,
    stop(): Promise<void> {
      stopped ??= new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) {
          cleanup();
          resolve();
          return;
        }
        const force = setTimeout(() => child.kill('SIGKILL'), 5_000);
        child.once('exit', () => {
          clearTimeout(force);
          cleanup();
          resolve();
        });
        child.kill('SIGTERM');
      });
      return stopped;
    },
  };
}
