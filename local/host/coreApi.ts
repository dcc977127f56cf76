import Module from 'node:module';
import type {
  Disposable,
  FunctionCallback,
  FunctionMetadata,
  HookCallback,
  ProgrammingModel,
  RpcLogCategory,
  RpcLogLevel,
} from './rpc.js';

/**
 * The local stand-in for `@azure/functions-core`, the module the real Node worker injects at run
 * time. `app.http(...)`, `app.serviceBusQueue(...)` and friends call `registerFunction` on it, so
 * capturing those calls gives the host exactly the registrations Azure sees.
 */
export interface RegisteredFunction {
  metadata: FunctionMetadata;
  callback: FunctionCallback;
}

export type HookName = 'appStart' | 'appTerminate' | 'preInvocation' | 'postInvocation' | string;

export class FunctionRegistry {
  readonly functions = new Map<string, RegisteredFunction>();
  readonly hooks = new Map<HookName, HookCallback[]>();
  programmingModel: ProgrammingModel | undefined;
  /** Shared by app-level hooks and every invocation's hooks, like the worker's appHookData. */
  readonly appHookData: Record<string, unknown> = {};
  systemLog: (level: RpcLogLevel, message: string) => void = () => {};

  /** The object `require('@azure/functions-core')` returns inside the app. */
  readonly coreModule = {
    version: '3.10.1-local',
    setProgrammingModel: (model: ProgrammingModel): void => {
      this.programmingModel = model;
    },
    getProgrammingModel: (): ProgrammingModel | undefined => this.programmingModel,
    registerFunction: (metadata: FunctionMetadata, callback: FunctionCallback): Disposable => {
      // The worker rejects duplicate names at indexing time; do the same instead of silently shadowing.
      if (this.functions.has(metadata.name.toLowerCase())) {
        throw new Error(`A function named "${metadata.name}" is already registered.`);
      }
      this.functions.set(metadata.name.toLowerCase(), { metadata, callback });
      return { dispose: () => this.functions.delete(metadata.name.toLowerCase()) };
    },
    registerHook: (hookName: HookName, callback: HookCallback): Disposable => {
      const list = this.hooks.get(hookName) ?? [];
      list.push(callback);
      this.hooks.set(hookName, list);
      return {
        dispose: () => {
          const index = list.indexOf(callback);
          if (index >= 0) list.splice(index, 1);
        },
      };
    },
    log: (level: RpcLogLevel, _category: RpcLogCategory, message: string): void => {
      this.systemLog(level, message);
    },
  };

  /** Runs the hooks of one kind in registration order, like the worker's executeHooks. */
  async runHooks(hookName: HookName, context: Record<string, unknown>): Promise<void> {
    for (const callback of [...(this.hooks.get(hookName) ?? [])]) {
      await callback(context);
    }
  }
}

const coreModuleId = '@azure/functions-core';

interface ModuleInternals {
  _load(request: string, parent: unknown, isMain: boolean): unknown;
}

let installed: FunctionRegistry | undefined;

/**
 * Makes `require('@azure/functions-core')` return the registry's module in this process.
 * One registry per process: the module cache holds one copy of the app and of `@azure/functions`.
 */
export function installCoreApi(registry: FunctionRegistry): void {
  if (installed) {
    throw new Error(
      'The local host already loaded an app in this process; start another app in a child process (see spawnLocalHost).',
    );
  }
  installed = registry;
  const internals = Module as unknown as ModuleInternals;
  const originalLoad = internals._load;
  internals._load = function load(request: string, parent: unknown, isMain: boolean): unknown {
    if (request === coreModuleId && installed) return installed.coreModule;
    return originalLoad.call(this, request, parent, isMain);
  };
}
