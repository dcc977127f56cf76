import type * as Cockatiel from 'cockatiel' with { 'resolution-mode': 'import' };
import type { RpcRetryContext } from './invoker.js';
import type { FunctionMetadata } from './rpc.js';

/**
 * A function's `retry` option. Azure honours it only on some triggers (timer, Event Hubs, Cosmos
 * DB, Kafka); of the triggers this host runs, that is the timer. Elsewhere it is refused at
 * start-up rather than silently ignored: a Service Bus trigger retries by redelivery
 * (MaxDeliveryCount) and an HTTP caller retries by itself.
 */
export interface RetryPolicyOptions {
  strategy: 'fixedDelay' | 'exponentialBackoff';
  /** Retries after the first attempt; -1 retries forever. */
  maxRetryCount: number;
  delayMs: number;
  minimumMs: number;
  maximumMs: number;
}

const triggersWithRetry = new Set(['timertrigger']);

function durationMs(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'number') return value;
  const d = value as { seconds?: number | string; nanos?: number };
  const ms = Number(d.seconds ?? 0) * 1000 + Number(d.nanos ?? 0) / 1e6;
  return Number.isFinite(ms) ? ms : Number.NaN;
}

/** The function's retry policy, validated; undefined when it has none. */
export function readRetryPolicy(
  metadata: FunctionMetadata,
  triggerType: string,
): RetryPolicyOptions | undefined {
  const raw = metadata.retryOptions as Record<string, unknown> | undefined | null;
  if (!raw) return undefined;
  const where = `Function "${metadata.name}": the retry option`;
  const strategy = String(raw.strategy ?? raw.retryStrategy ?? '');
  if (!triggersWithRetry.has(triggerType.toLowerCase())) {
    throw new Error(
      `${where} (${strategy}) is not supported on ${triggerType} triggers: Azure honours retry policies on timer, ` +
        'Event Hubs, Cosmos DB and Kafka triggers only (Service Bus redelivers up to MaxDeliveryCount). Remove it.',
    );
  }
  const maxRetryCount = Number(raw.maxRetryCount);
  if (!Number.isInteger(maxRetryCount) || maxRetryCount < -1) {
    throw new Error(
      `${where}: maxRetryCount must be an integer, -1 for no limit (got ${String(raw.maxRetryCount)}).`,
    );
  }
  const nonNegative = (name: string, value: number | undefined): number => {
    if (value === undefined || !Number.isFinite(value) || value < 0) {
      throw new Error(`${where}: ${name} must be a non-negative duration for strategy "${strategy}".`);
    }
    return value;
  };
  if (strategy === 'fixedDelay') {
    const delayMs = nonNegative('delayInterval', durationMs(raw.delayInterval));
    return { strategy, maxRetryCount, delayMs, minimumMs: delayMs, maximumMs: delayMs };
  }
  if (strategy === 'exponentialBackoff') {
    const minimumMs = nonNegative('minimumInterval', durationMs(raw.minimumInterval));
    const maximumMs = nonNegative('maximumInterval', durationMs(raw.maximumInterval));
    if (maximumMs < minimumMs) throw new Error(`${where}: maximumInterval is shorter than minimumInterval.`);
    return { strategy, maxRetryCount, delayMs: minimumMs, minimumMs, maximumMs };
  }
  throw new Error(`${where}: strategy must be "fixedDelay" or "exponentialBackoff" (got "${strategy}").`);
}

let cockatiel: Promise<typeof Cockatiel> | undefined;

/**
 * Runs one occurrence with its retry policy (cockatiel's retry with a constant or exponential
 * backoff), handing each attempt the retry context the handler sees in Azure. Resolves with the
 * number of retries used when an attempt succeeds; rejects with the last error when they run out
 * or `signal` aborts a wait.
 */
export async function runWithRetry(
  options: RetryPolicyOptions,
  attempt: (context: RpcRetryContext) => Promise<void>,
  signal: AbortSignal,
): Promise<number> {
  // cockatiel ships as an ES module only; this package compiles to CommonJS.
  cockatiel ??= import('cockatiel');
  const { ConstantBackoff, ExponentialBackoff, handleAll, retry } = await cockatiel;
  const backoff =
    options.strategy === 'fixedDelay'
      ? new ConstantBackoff(options.delayMs)
      : new ExponentialBackoff({ initialDelay: Math.max(options.minimumMs, 1), maxDelay: options.maximumMs });
  // cockatiel's wait between attempts ignores the signal: unref it so a stopped host is not kept
  // alive by it, and refuse to start another attempt once stopped.
  const policy = retry(handleAll, {
    maxAttempts: options.maxRetryCount === -1 ? Number.POSITIVE_INFINITY : options.maxRetryCount,
    backoff,
  }).dangerouslyUnref();
  let retryCount = 0;
  let lastError: Error | undefined;
  await policy.execute(async () => {
    if (signal.aborted) throw lastError ?? new Error('The host stopped before the first attempt.');
    const context: RpcRetryContext = { retryCount, maxRetryCount: options.maxRetryCount };
    if (lastError) {
      context.exception = { message: lastError.message, stackTrace: lastError.stack, source: lastError.name };
    }
    try {
      await attempt(context);
    } catch (err) {
      lastError = err instanceof Error ? err : new Error(String(err));
      retryCount++;
      throw err;
    }
  }, signal);
  return retryCount;
}
