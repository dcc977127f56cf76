import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { LocalFunctionInfo } from './index.js';

const readyMarker = 'LOCAL_HOST_READY';

export interface SpawnLocalHostOptions {
  appRoot: string;
  /** Settings for the child: merged over the parent's environment. */
  env?: Record<string, string>;
  /** Default 0 (a free port). */
  httpPort?: number;
  graceMs?: number;
  /** How long to wait for the readiness line; default 30 s. */
  readyTimeoutMs?: number;
  /** Every line the child prints (stdout and stderr). */
  onLine?: (line: string) => void;
  /** Own process group: a terminal's Ctrl-C then reaches only the parent, which stops the host. */
  ownProcessGroup?: boolean;
}

export interface SpawnedLocalHost {
  child: ChildProcess;
  httpPort: number;
  baseUrl: string;
  functionKey: string;
  /** The operator credential (Authorization: Bearer). */
  operatorKey: string;
  functions: LocalFunctionInfo[];
  /** Everything the child printed so far. */
  output: string[];
  /** Resolves when the child exits. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends a signal (SIGTERM for a graceful stop, SIGKILL for a crash) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Runs the CLI in a child process, so each caller gets a fresh app (the module cache holds one
 * app per process) and can crash it with SIGKILL. Resolves once the host prints its readiness line.
 */
export async function spawnLocalHost(options: SpawnLocalHostOptions): Promise<SpawnedLocalHost> {
  const args = [join(__dirname, 'cli.js'), '--app', options.appRoot, '--port', String(options.httpPort ?? 0)];
  if (options.graceMs !== undefined) args.push('--grace-ms', String(options.graceMs));
  const child = spawn(process.execPath, ['--enable-source-maps', ...args], {
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.ownProcessGroup ?? false,
  });
  const output: string[] = [];
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const ready = new Promise<Omit<SpawnedLocalHost, 'child' | 'output' | 'exited' | 'kill'>>(
    (resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(
          new Error(
            `The local host did not get ready within ${options.readyTimeoutMs ?? 30_000} ms:\n${output.join('\n')}`,
          ),
        );
      }, options.readyTimeoutMs ?? 30_000);
      const onLine = (line: string): void => {
        output.push(line);
        options.onLine?.(line);
        if (line.startsWith(`${readyMarker} `)) {
          clearTimeout(timer);
          resolve(JSON.parse(line.slice(readyMarker.length + 1)));
        }
      };
      createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', onLine);
      createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', onLine);
      void exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(
          new Error(
            `The local host exited (code ${code}, signal ${signal}) before it was ready:\n${output.join('\n')}`,
          ),
        );
      });
    },
  );
  const info = await ready;
  return {
    ...info,
    child,
    output,
    exited,
    async kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
