import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { startStack, type Stack } from './stack.js';
import { PortBusyError } from './ports.js';
import {
  parseStartArgs,
  stableCallbackSigningKeys,
  stableFunctionKey,
  startUsage,
  tunableSettings,
  UsageError,
} from './startOptions.js';
import { formatStackLine } from './logFormat.js';
import { readinessBlock } from './readiness.js';

/**
 * `npm start`: the whole system on this machine (Azurite, the Service Bus emulator, the demo
 * remote services and the local functions host), one readiness block, then function logs until
 * Ctrl-C. SIGINT, SIGTERM and SIGHUP stop the host first (it finishes in-flight invocations),
 * then the services it depends on, and exit 0. A second signal exits at once.
 *
 * Exit codes: 0 stopped on request; 1 could not start (busy port, bad setting, crash) or the host
 * died; 2 bad command line.
 */

/** Written when ready, removed on stop: lets `npm run demo` find this stack and its settings. */
export const stackInfoFile = 'stack.json';

function fail(message: string, code: number): never {
  process.stderr.write(`npm start: ${message}\n`);
  process.exit(code);
}

function oneLine(e: unknown): string {
  if (e instanceof PortBusyError || e instanceof UsageError) return e.message;
  const err = e as NodeJS.ErrnoException & { port?: number };
  if (err?.code === 'EADDRINUSE') {
    return `a port is already in use (${err.message}); stop whatever holds it or choose other ports (see --help)`;
  }
  const first = String(err?.message ?? e).split('\n')[0];
  return `could not start: ${first}`;
}

async function main(): Promise<void> {
  let options;
  try {
    options = parseStartArgs(process.argv.slice(2), process.env);
  } catch (e) {
    fail(`${(e as Error).message}\n\n${startUsage}`, 2);
  }
  if (!options) {
    process.stdout.write(startUsage);
    return;
  }
  const { ports, dataDir, inMemory, logMode, settings, storageAccounts } = options;

  let stack: Stack | undefined;
  let stopping: Promise<void> | undefined;
  let startFailed = false;

  const stopAll = async (): Promise<void> => {
    if (!stack) return;
    // The host first: it finishes in-flight invocations while storage and the bus are still up.
    await stack.killHost('SIGTERM');
    await stack.stop();
    rmSync(join(dataDir, stackInfoFile), { force: true });
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      process.stderr.write(`${signal} again: exiting without waiting.\n`);
      stack?.host()?.child.kill('SIGKILL');
      process.exit(1);
    }
    process.stderr.write(`\n${signal}: stopping the host, then the services...\n`);
    stopping = stopAll().then(
      () => {
        if (stack) process.stderr.write('Stopped.\n');
        // While starting, main() exits once startStack settles.
        if (stack || startFailed) process.exit(0);
      },
      (e: unknown) => fail(`stopping failed: ${(e as Error).message}`, 1),
    );
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, onSignal);

  const key = stableFunctionKey(dataDir, process.env);
  // Kept in the data folder like the function key: callbacks pending across a restart stay valid.
  const signing = stableCallbackSigningKeys(dataDir, process.env);
  let ready = false;
  try {
    if (!inMemory) mkdirSync(dataDir, { recursive: true });
    stack = await startStack({
      ports,
      dataDir: inMemory ? undefined : dataDir,
      // Messages in flight survive a restart too (<dataDir>/servicebus/servicebus.log).
      persistServiceBus: !inMemory,
      // npm start shows order@2: approvals above 1,000 and payment confirmed by webhook.
      settings: { NEW_ORDER_WORKFLOW_VERSION: '2', CALLBACK_SIGNING_KEYS: signing.keys, ...settings },
      storageAccounts,
      functionKey: key.key,
      ownProcessGroups: true,
      log: (line) => {
        // Before the readiness block, only trouble (the host's own banner is replaced by ours).
        const shown = formatStackLine(line, ready ? logMode : 'quiet');
        if (shown !== undefined) process.stdout.write(`${shown}\n`);
      },
    });
  } catch (e) {
    startFailed = true;
    if (stopping) {
      await stopping;
      process.exit(0);
    }
    fail(oneLine(e), 1);
  }
  if (stopping) {
    // A signal arrived while starting: stop what started, say nothing more.
    await stopAll();
    process.exit(0);
  }

  const readyMs = performance.now();
  ready = true;
  // stack.json first: whoever reads the readiness block (the demo, a test) may look for it at once.
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(
    join(dataDir, stackInfoFile),
    JSON.stringify(
      {
        pid: process.pid,
        baseUrl: stack.baseUrl,
        settings: Object.fromEntries(tunableSettings.map((n) => [n, stack!.env[n]])),
        remote: {
          inventory: stack.remote.inventory.url,
          payment: stack.remote.payment.url,
          shipping: stack.remote.shipping.url,
        },
        startedAt: new Date().toISOString(),
      },
      null,
      2,
    ),
  );
  process.stdout.write(
    readinessBlock({
      stack,
      readyMs,
      dataDir,
      inMemory,
      keySource: key.source,
      operatorKeySource: process.env.FUNCTIONS_LOCAL_OPERATOR_KEY?.trim()
        ? 'from FUNCTIONS_LOCAL_OPERATOR_KEY'
        : 'new each start (set FUNCTIONS_LOCAL_OPERATOR_KEY to keep one)',
    }) + '\n',
  );

  // A host that dies on its own (not by our signal) takes the stack down with exit 1.
  const host = stack.host();
  void host?.exited.then(async ({ code, signal }) => {
    if (stopping) return;
    process.stderr.write(
      `The functions host exited unexpectedly (code ${code}, signal ${signal}); stopping.\n`,
    );
    stopping = stopAll();
    await stopping.catch(() => undefined);
    process.exit(1);
  });
}

main().catch((e: unknown) => fail(oneLine(e), 1));
