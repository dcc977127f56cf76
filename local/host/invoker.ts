import { randomUUID } from 'node:crypto';
import { inspect } from 'node:util';
import type { FunctionRegistry, RegisteredFunction } from './coreApi.js';
import { timerTraceContext, type RpcTraceContext } from './traceContext.js';
import type { LogSink } from './logger.js';
import type { OutputBindings } from './outputBindings.js';
import type {
  CoreInvocationContext,
  FunctionCallback,
  FunctionMetadata,
  InvocationState,
  RpcInvocationRequest,
  RpcInvocationResponse,
  RpcLogCategory,
  RpcLogLevel,
  RpcParameterBinding,
  RpcTypedData,
} from './rpc.js';

/** What a trigger hands to the worker: the trigger's input and its metadata, in RPC form. */
export interface TriggerInput {
  data: RpcTypedData;
  triggerMetadata?: Record<string, RpcTypedData>;
  /** Why the function runs, for the "Executing" log line (like the host's Reason='...'). */
  reason: string;
  /** Called with the invocation id before the handler's arguments are built (HTTP streaming needs it). */
  onInvocationId?: (invocationId: string) => void;
  /** Set when the function has a retry policy: which attempt this is (`context.retryContext`). */
  retryContext?: RpcRetryContext;
  /** The W3C trace context the invocation continues (`context.traceContext`); a new trace when absent. */
  traceContext?: RpcTraceContext;
}

/** The worker protocol's RetryContext, as the library reads it into `context.retryContext`. */
export interface RpcRetryContext {
  retryCount: number;
  maxRetryCount: number;
  exception?: { message: string; stackTrace?: string; source?: string };
}

export interface InvocationOutcome {
  invocationId: string;
  response: RpcInvocationResponse;
}

export function triggerBindingOf(metadata: FunctionMetadata): { name: string; type: string } {
  for (const [name, binding] of Object.entries(metadata.bindings)) {
    if (binding.direction === 'in' && typeof binding.type === 'string' && /trigger$/i.test(binding.type)) {
      return { name, type: binding.type };
    }
  }
  throw new Error(`Function "${metadata.name}" has no trigger binding.`);
}

/** One structured value per log argument: strings as they are, errors with their stack, the rest as JSON. */
export function formatLogArgs(args: unknown[]): string {
  return args
    .map((arg) => {
      if (typeof arg === 'string') return arg;
      if (arg instanceof Error) return arg.stack ?? `${arg.name}: ${arg.message}`;
      try {
        const json = JSON.stringify(arg);
        return json === undefined ? String(arg) : json;
      } catch {
        return inspect(arg, { depth: 4, breakLength: Infinity });
      }
    })
    .join(' ');
}

const userLogMethods = ['log', 'trace', 'debug', 'info', 'warn', 'error'] as const;

/**
 * Drives one invocation the way the Node worker does: the library's own ProgrammingModel builds the
 * handler's arguments from RPC data (so JSON parsing, camel-casing of trigger metadata and the
 * HttpRequest/Timer shapes match Azure), then pre-invocation hooks, the handler, post-invocation
 * hooks, and the library converts the result back.
 */
export class Invoker {
  private inFlight = new Set<Promise<unknown>>();

  constructor(
    private readonly registry: FunctionRegistry,
    private readonly log: LogSink,
    private readonly outputs?: OutputBindings,
  ) {}

  get activeInvocations(): number {
    return this.inFlight.size;
  }

  /** Resolves when every invocation started so far has finished, or after `timeoutMs`. */
  async drain(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.inFlight.size > 0) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) return false;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.inFlight]),
        new Promise((resolve) => (timer = setTimeout(resolve, remaining))),
      ]);
      clearTimeout(timer);
    }
    return true;
  }

  async invoke(fn: RegisteredFunction, input: TriggerInput): Promise<InvocationOutcome> {
    const run = this.run(fn, input);
    this.inFlight.add(run);
    try {
      return await run;
    } finally {
      this.inFlight.delete(run);
    }
  }

  private async run(fn: RegisteredFunction, input: TriggerInput): Promise<InvocationOutcome> {
    const model = this.registry.programmingModel;
    if (!model) throw new Error('The app registered functions without a programming model.');
    const invocationId = randomUUID();
    const functionName = fn.metadata.name;
    const trigger = triggerBindingOf(fn.metadata);
    const inputData: RpcParameterBinding[] = [{ name: trigger.name, data: input.data }];
    const request: RpcInvocationRequest = {
      invocationId,
      functionId: functionName,
      inputData,
      triggerMetadata: input.triggerMetadata ?? {},
      traceContext: input.traceContext ?? timerTraceContext(),
      ...(input.retryContext ? { retryContext: input.retryContext } : {}),
    };
    const log = this.log;
    const coreCtx: CoreInvocationContext = {
      invocationId,
      request,
      metadata: fn.metadata,
      state: undefined as InvocationState,
      log(level: RpcLogLevel, category: RpcLogCategory, message: string) {
        log({ level, category, functionName, invocationId, message });
      },
    };

    const started = Date.now();
    log({
      level: 'information',
      category: 'system',
      functionName,
      invocationId,
      message: `Executing 'Functions.${functionName}' (Reason='${input.reason}', Id=${invocationId})`,
    });
    try {
      input.onInvocationId?.(invocationId);
      const invocationModel = model.getInvocationModel(coreCtx);
      const args = await invocationModel.getArguments();
      const context = args.context as Record<string, unknown>;
      jsonFormatUserLogs(context);
      const hookData: Record<string, unknown> = {};
      const preContext: Record<string, unknown> = {
        hookData,
        appHookData: this.registry.appHookData,
        invocationContext: context,
        functionCallback: fn.callback,
        inputs: args.inputs,
      };
      coreCtx.state = 'preInvocationHooks';
      try {
        await this.registry.runHooks('preInvocation', preContext);
      } finally {
        coreCtx.state = undefined;
      }
      const inputs = preContext.inputs as unknown[];
      const callback = preContext.functionCallback as FunctionCallback;
      const postContext: Record<string, unknown> = {
        hookData,
        appHookData: this.registry.appHookData,
        invocationContext: context,
        inputs,
        result: null,
        error: null,
      };
      coreCtx.state = 'invocation';
      try {
        postContext.result = await invocationModel.invokeFunction(context, inputs, callback);
      } catch (err) {
        postContext.error = err;
      } finally {
        coreCtx.state = undefined;
      }
      coreCtx.state = 'postInvocationHooks';
      try {
        await this.registry.runHooks('postInvocation', postContext);
      } finally {
        coreCtx.state = undefined;
      }
      // A post-invocation hook may clear the error, like on the worker.
      if (postContext.error !== null && postContext.error !== undefined) throw postContext.error;
      const response = await invocationModel.getResponse(context, postContext.result);
      await this.outputs?.send(fn.metadata, response);
      log({
        level: 'information',
        category: 'system',
        functionName,
        invocationId,
        message: `Executed 'Functions.${functionName}' (Succeeded, Id=${invocationId}, Duration=${Date.now() - started}ms)`,
      });
      return { invocationId, response };
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      log({
        level: 'error',
        category: 'system',
        functionName,
        invocationId,
        message: `Executed 'Functions.${functionName}' (Failed, Id=${invocationId}, Duration=${Date.now() - started}ms) ${error.stack ?? error.message}`,
      });
      throw new InvocationError(invocationId, error);
    }
  }
}

export class InvocationError extends Error {
  constructor(
    readonly invocationId: string,
    readonly cause: Error,
  ) {
    super(`Invocation ${invocationId} failed: ${cause.message}`);
    this.name = 'InvocationError';
  }
}

/**
 * The library formats log arguments with util.format before they reach the host; the local host
 * prints structured arguments as JSON instead, so a log line can be grepped and parsed.
 */
function jsonFormatUserLogs(context: Record<string, unknown>): void {
  for (const method of userLogMethods) {
    const original = context[method];
    if (typeof original !== 'function') continue;
    const bound = (original as (...args: unknown[]) => void).bind(context);
    context[method] = (...args: unknown[]) => bound(formatLogArgs(args));
  }
}
