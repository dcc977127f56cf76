import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { resolveEntryFiles } from './appLoader.js';
import { FunctionRegistry, installCoreApi, type RegisteredFunction } from './coreApi.js';
import { defaultMaxRequestBodyBytes, HttpTriggerHost, toHttpRoute, type HttpRoute } from './httpTrigger.js';
import { Invoker, triggerBindingOf } from './invoker.js';
import { disabledSettingName, isFunctionDisabled } from './disabled.js';
import { lineSink, type LogSink } from './logger.js';
import { notRunReason } from './notRun.js';
import { OutputBindings, validateOutputBindings } from './outputBindings.js';
import type { LocalOperator } from './platformAuth.js';
import { operatorRole } from '../../shared/http/operatorAuth.js';
import { readRetryPolicy } from './retryPolicy.js';
import { ServiceBusBatchTrigger } from './serviceBusBatchTrigger.js';
import { ServiceBusTrigger, describeEntity, toServiceBusTriggerConfig } from './serviceBusTrigger.js';
import { applySettings, readHostJson, resolveSettingExpressions } from './settings.js';
import { TimerTrigger, parseSchedule } from './timerTrigger.js';

export { spawnLocalHost, type SpawnedLocalHost, type SpawnLocalHostOptions } from './spawn.js';
export { formatLogLine, type LogEntry } from './logger.js';

export interface LocalHostOptions {
  /** The folder with the app's package.json (its `main` glob names the compiled functions) and host.json. */
  appRoot: string;
  /** App settings, put into process.env before the app's files load. */
  env?: Record<string, string>;
  /** Default 7071; 0 picks a free port. */
  httpPort?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** The key for `authLevel: 'function'`; default FUNCTIONS_LOCAL_KEY, else a random one. */
  functionKey?: string;
  /**
   * The operator credential (`Authorization: Bearer <key>`), which signs the caller in as an operator
   * the way App Service Authentication signs in an Entra user; default FUNCTIONS_LOCAL_OPERATOR_KEY,
   * else a random one.
   */
  operatorKey?: string;
  /** Where log lines go; default stdout. */
  log?: (line: string) => void;
  /** How long stop() lets in-flight invocations finish; default 30 s. */
  shutdownGraceMs?: number;
  /** Default 100 MB, Azure's limit. */
  maxRequestBodyBytes?: number;
}

/** Who the operator credential signs in as: fixed, so history written locally reads the same every run. */
export const localOperatorPrincipal = {
  name: 'local-operator',
  id: '0f0f0f0f-0000-4000-8000-00000000000f',
  roles: [operatorRole],
} as const;

export interface LocalFunctionInfo {
  name: string;
  /** `http`, `serviceBus`, `timer`, or the binding type of a trigger the local host does not run. */
  trigger: string;
  /** HTTP: methods and URL template; Service Bus: the entity; timer: the resolved schedule. */
  detail: string;
  authLevel?: string;
  /** Set by `AzureWebJobs.<name>.Disabled`: listed, but never triggered. */
  disabled?: boolean;
  /** Why the local host does not run this function (a trigger or binding it cannot carry out). */
  notRun?: string;
}

export interface LocalHost {
  httpPort: number;
  /** e.g. http://127.0.0.1:7071/api */
  baseUrl: string;
  functionKey: string;
  operatorKey: string;
  /** The name the app sees for the operator (x-ms-client-principal-name). */
  operatorName: string;
  functions: LocalFunctionInfo[];
  stop(): Promise<void>;
}

function resolveBindingSettings(fn: RegisteredFunction): void {
  for (const binding of Object.values(fn.metadata.bindings)) {
    for (const [key, value] of Object.entries(binding)) {
      if (typeof value === 'string' && value.includes('%')) {
        binding[key] = resolveSettingExpressions(value, fn.metadata.name, key);
      }
    }
  }
}

/**
 * Loads an app's own `@azure/functions` registrations and runs them: HTTP, Service Bus queue and
 * topic triggers, and timers. One app per process: the module cache keeps the app and its settings.
 */
export async function startLocalHost(options: LocalHostOptions): Promise<LocalHost> {
  const appRoot = resolve(options.appRoot);
  const write = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const log: LogSink = lineSink(write);
  const graceMs = options.shutdownGraceMs ?? 30_000;

  applySettings(options.env ?? {});
  // The app runs behind (local) App Service Authentication, so it may trust the principal headers.
  process.env.WEBSITE_AUTH_ENABLED = 'true';
  const hostJson = readHostJson(appRoot);
  const files = resolveEntryFiles(appRoot);

  const registry = new FunctionRegistry();
  registry.systemLog = (level, message) => log({ level, category: 'system', message });
  installCoreApi(registry);
  // Plain CommonJS loading, as the worker does, so the app shares this process's module cache.
  const loadModule = createRequire(__filename);
  for (const file of files) {
    try {
      loadModule(file);
    } catch (err) {
      throw new Error(`Loading ${file} failed: ${(err as Error).stack ?? String(err)}`);
    }
  }
  if (registry.functions.size === 0) {
    throw new Error(
      `No functions registered by ${files.join(', ')}: do the files call app.http(...) and friends?`,
    );
  }
  const model = registry.programmingModel;
  if (!model) throw new Error('The app registered functions without a programming model.');
  const capabilities = (await model.getCapabilities?.({})) ?? {};

  const outputs = new OutputBindings();
  const invoker = new Invoker(registry, log, outputs);
  const httpRoutes: HttpRoute[] = [];
  const serviceBusTriggers: (ServiceBusTrigger | ServiceBusBatchTrigger)[] = [];
  const timers: TimerTrigger[] = [];
  const functions: LocalFunctionInfo[] = [];

  for (const fn of registry.functions.values()) {
    const name = fn.metadata.name;
    const trigger = triggerBindingOf(fn.metadata);
    if (isFunctionDisabled(name, process.env)) {
      // Like the Azure host, a disabled function's trigger never starts, so nothing about it (a
      // binding the host cannot run, a setting it lacks) is a reason to stop the app.
      functions.push({
        name,
        trigger: triggerLabel(trigger.type),
        detail: `disabled by ${disabledSettingName(name)}`,
        disabled: true,
      });
      continue;
    }
    const reason = notRunReason(fn.metadata, trigger.name);
    if (reason !== undefined) {
      const route =
        trigger.type.toLowerCase() === 'httptrigger' ? routeOrUndefined(fn, trigger.name) : undefined;
      if (route) httpRoutes.push({ ...route, notRun: reason });
      else functions.push({ name, trigger: triggerLabel(trigger.type), detail: 'not run', notRun: reason });
      continue;
    }
    resolveBindingSettings(fn);
    validateOutputBindings(fn.metadata);
    const retry = readRetryPolicy(fn.metadata, trigger.type);
    const binding = fn.metadata.bindings[trigger.name];
    switch (trigger.type.toLowerCase()) {
      case 'httptrigger':
        httpRoutes.push(toHttpRoute(fn, trigger.name));
        break;
      case 'servicebustrigger': {
        const config = toServiceBusTriggerConfig(fn, trigger.name, hostJson);
        serviceBusTriggers.push(
          config.batch
            ? new ServiceBusBatchTrigger(config, invoker, log)
            : new ServiceBusTrigger(config, invoker, log),
        );
        functions.push({
          name,
          trigger: 'serviceBus',
          detail: config.batch
            ? `${describeEntity(config.entity)} (batches of up to ${config.maxMessageBatchSize})`
            : describeEntity(config.entity),
        });
        break;
      }
      default: {
        // notRunReason leaves only timers here.
        if (typeof binding.schedule !== 'string')
          throw new Error(`Function "${name}": a timer needs a schedule.`);
        const schedule = parseSchedule(binding.schedule, name);
        timers.push(new TimerTrigger(fn, schedule, binding.runOnStartup === true, invoker, log, retry));
        functions.push({ name, trigger: 'timer', detail: schedule.text });
      }
    }
  }

  const functionKey =
    options.functionKey ?? process.env.FUNCTIONS_LOCAL_KEY ?? randomBytes(24).toString('base64url');
  const operator: LocalOperator = {
    key:
      options.operatorKey ??
      (process.env.FUNCTIONS_LOCAL_OPERATOR_KEY?.trim() || randomBytes(24).toString('base64url')),
    ...localOperatorPrincipal,
  };
  const bindHost = options.host ?? '127.0.0.1';
  const httpHost = new HttpTriggerHost(
    httpRoutes,
    {
      port: options.httpPort ?? 7071,
      host: bindHost,
      routePrefix: hostJson.routePrefix,
      functionKey,
      operator,
      maxRequestBodyBytes: options.maxRequestBodyBytes ?? requestBodyLimitFromSettings(),
      streamProxyUri: capabilities.HttpUri,
    },
    invoker,
    log,
  );
  const httpPort = await httpHost.listen();
  const urlHost = bindHost === '0.0.0.0' || bindHost === '::' ? '127.0.0.1' : bindHost;
  const baseUrl = `http://${urlHost.includes(':') ? `[${urlHost}]` : urlHost}:${httpPort}${hostJson.routePrefix ? `/${hostJson.routePrefix}` : ''}`;
  // Where services call back (issue 25): this host's own address, unless the settings say. Not
  // WEBSITE_HOSTNAME: the console reads that as "running in App Service".
  if (!process.env.CALLBACK_BASE_URL) {
    process.env.CALLBACK_BASE_URL = `http://${urlHost.includes(':') ? `[${urlHost}]` : urlHost}:${httpPort}`;
  }
  for (const route of httpRoutes) {
    functions.push({
      name: route.name,
      trigger: 'http',
      detail: `[${[...route.methods].join(',')}] ${httpHost.urlOf(route, baseUrl)}`,
      authLevel: route.authLevel,
      ...(route.notRun !== undefined ? { notRun: route.notRun } : {}),
    });
  }
  functions.sort((a, b) => a.name.localeCompare(b.name));
  for (const fn of functions) {
    if (fn.notRun === undefined) continue;
    log({
      level: 'warning',
      category: 'host',
      functionName: fn.name,
      message: `This function is not run by the local host: ${fn.notRun}.${fn.trigger === 'http' ? ' Its route answers 501.' : ''}`,
    });
  }

  await registry.runHooks('appStart', {
    hookData: registry.appHookData,
    appHookData: registry.appHookData,
    functionAppDirectory: appRoot,
  });
  try {
    for (const trigger of serviceBusTriggers) await trigger.start();
  } catch (err) {
    await httpHost.close();
    await Promise.all(serviceBusTriggers.map((t) => t.close()));
    await outputs.close();
    throw err;
  }
  for (const timer of timers) timer.start();

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      log({
        level: 'information',
        category: 'host',
        message: 'Stopping: no new work is taken; waiting for in-flight invocations.',
      });
      for (const timer of timers) timer.stop();
      const httpClosed = httpHost.close();
      await Promise.all(serviceBusTriggers.map((t) => t.stopReceiving().catch(() => undefined)));
      const drained = await invoker.drain(graceMs);
      if (!drained) {
        log({
          level: 'warning',
          category: 'host',
          message: `${invoker.activeInvocations} invocation(s) still running after ${graceMs} ms; abandoning their messages.`,
        });
      }
      await Promise.all(serviceBusTriggers.map((t) => t.close()));
      await outputs.close();
      httpHost.destroyConnections();
      await httpClosed;
      await registry
        .runHooks('appTerminate', { hookData: registry.appHookData, appHookData: registry.appHookData })
        .catch((err: unknown) => {
          log({ level: 'error', category: 'host', message: `appTerminate hook failed: ${String(err)}` });
        });
      log({ level: 'information', category: 'host', message: 'Stopped.' });
    })();
    return stopping;
  };

  return {
    httpPort,
    baseUrl,
    functionKey,
    operatorKey: operator.key,
    operatorName: operator.name,
    functions,
    stop,
  };
}

/** The 501 route of an HTTP function that is not run; a route this host cannot parse just has none. */
function routeOrUndefined(fn: RegisteredFunction, triggerName: string): HttpRoute | undefined {
  try {
    return toHttpRoute(fn, triggerName);
  } catch {
    return undefined;
  }
}

/** How a function's trigger is listed: the three the host runs by short name, any other by its binding type. */
function triggerLabel(type: string): string {
  const short: Record<string, string> = {
    httptrigger: 'http',
    servicebustrigger: 'serviceBus',
    timertrigger: 'timer',
  };
  return short[type.toLowerCase()] ?? type;
}

/**
 * The Azure host's FUNCTIONS_REQUEST_BODY_SIZE_LIMIT (bytes): larger bodies are refused with 413
 * before the function runs, from their declared Content-Length without reading them.
 */
function requestBodyLimitFromSettings(): number {
  const text = process.env.FUNCTIONS_REQUEST_BODY_SIZE_LIMIT;
  if (text === undefined || text.trim() === '') return defaultMaxRequestBodyBytes;
  const bytes = Number(text);
  if (!Number.isSafeInteger(bytes) || bytes <= 0) {
    throw new Error(`FUNCTIONS_REQUEST_BODY_SIZE_LIMIT must be a positive number of bytes (got "${text}").`);
  }
  return bytes;
}
