import { systemClock, type Clock } from '../domain/clock.js';
import { loadCockatiel, type Cockatiel } from './cockatiel.js';
import { breakerFor, normalizeBaseUrl } from './circuitBreakers.js';
import { injectTraceHeaders } from '../observability/tracing.js';
import {
  InterruptedAttemptError,
  StopCallingError,
  TransientRemoteError,
  isTransientStatus,
  parseRetryAfter,
  problemDetail,
  type StopReason,
} from './remoteCallErrors.js';

/**
 * The Agent's call to its remote service: retries with decorrelated-jitter back-off, a circuit
 * breaker per service, a timeout per attempt, and everything inside the step's complete-by.
 * Every attempt carries the caller's Idempotency-Key, so a retry never doubles a side effect.
 * When the deadline passes the call stops at once and reports `deadline-passed`: the Agent then
 * sends nothing, as the pattern requires, and the Supervisor decides what happens to the step.
 */

export { circuitStatesFor, resetCircuitBreakers, type CircuitStateName } from './circuitBreakers.js';
export type { StopReason } from './remoteCallErrors.js';

export interface RemoteCallPolicyOptions {
  /** Requests sent at most (waits on an open circuit do not count). */
  maxAttempts: number;
  initialDelayMs: number;
  maxDelayMs: number;
  /** One attempt's budget, so a hung attempt cannot eat the whole deadline. */
  attemptTimeoutMs: number;
  /** Consecutive transient failures that open the service's circuit. */
  breakerThreshold: number;
  breakerHalfOpenAfterMs: number;
}

export const defaultRemoteCallPolicy: Readonly<RemoteCallPolicyOptions> = Object.freeze({
  maxAttempts: 5,
  initialDelayMs: 200,
  maxDelayMs: 5_000,
  attemptTimeoutMs: 10_000,
  breakerThreshold: 5,
  breakerHalfOpenAfterMs: 10_000,
});

export interface RemoteCallRequest {
  /** The service's base URL, e.g. http://127.0.0.1:7102 */
  baseUrl: string;
  /** The operation path, e.g. `charge` (see remoteOperations.ts). */
  operation: string;
  body: unknown;
  /** Stable for the (order, step), e.g. `{orderId}:{step}`; sent on every attempt. */
  idempotencyKey: string;
  /** The step's complete-by; nothing is sent at or after it. */
  completeBy: Date;
  /**
   * After a failed attempt, no retry starts (and no back-off waits) past this: the call ends with
   * `report-by` so the caller can still answer before complete-by. An attempt already in flight
   * runs on until complete-by: a slow success is still a success.
   */
  reportBy?: Date;
  /** The caller's own cancellation (e.g. the host shutting down); ends the call like the deadline. */
  signal?: AbortSignal;
  /** Observes each request just before it is sent. */
  onAttempt?: (attempt: { number: number; startedAt: Date }) => void;
  /** Observes the service's pushback (429 or 503) and its Retry-After, before any retry waits. */
  onPushback?: (status: number, retryAfterMs: number | undefined) => void;
}

export type RemoteCallResult =
  | { outcome: 'succeeded'; status: number; body: unknown; attempts: number }
  | { outcome: 'failed-permanently'; status?: number; error: string; body?: unknown; attempts: number }
  /**
   * Stop silently: the deadline passed, the caller aborted, transient failures outlasted the
   * attempt budget, or the service asked us to wait past the deadline. No reply is due.
   */
  | {
      outcome: 'deadline-passed';
      reason: StopReason;
      attempts: number;
      lastError?: string;
      /** The status of the last failed answer, when there was one. */
      lastStatus?: number;
    };

/** The status the service last answered the call with (none: it never answered). */
export function lastStatusOf(result: RemoteCallResult): number | undefined {
  return result.outcome === 'deadline-passed' ? result.lastStatus : result.status;
}

/** The largest delay setTimeout accepts. */
const maxTimerMs = 2_147_483_647;

interface AttemptResponse {
  status: number;
  body: unknown;
}

function resolveOptions(options: Partial<RemoteCallPolicyOptions>): RemoteCallPolicyOptions {
  const resolved = { ...defaultRemoteCallPolicy, ...options };
  for (const [name, value] of Object.entries(resolved)) {
    const min = name === 'maxAttempts' || name === 'breakerThreshold' ? 1 : 0;
    if (!Number.isFinite(value) || value < min) {
      throw new RangeError(`remote call option ${name} must be a number >= ${min}, got ${value}`);
    }
  }
  return resolved;
}

async function readBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

export async function callRemoteService(
  request: RemoteCallRequest,
  options: Partial<RemoteCallPolicyOptions> = {},
  clock: Clock = systemClock,
): Promise<RemoteCallResult> {
  const policy = resolveOptions(options);
  if (Number.isNaN(request.completeBy.getTime())) throw new TypeError('completeBy is not a valid date');
  if (!request.idempotencyKey) throw new TypeError('idempotencyKey is required');
  const url = `${normalizeBaseUrl(request.baseUrl)}/${encodeURIComponent(request.operation)}`;
  const payload = JSON.stringify(request.body);
  const {
    BrokenCircuitError,
    DelegateBackoff,
    ExponentialBackoff,
    TimeoutStrategy,
    handleWhen,
    retry,
    timeout,
    wrap,
  } = await loadCockatiel();
  const breaker = await breakerFor(request.baseUrl, {
    threshold: policy.breakerThreshold,
    halfOpenAfterMs: policy.breakerHalfOpenAfterMs,
  });
  const msLeft = () => request.completeBy.getTime() - clock.now().getTime();
  const reportBy = request.reportBy?.getTime() ?? Number.POSITIVE_INFINITY;
  const msToReport = () => reportBy - clock.now().getTime();
  let attempts = 0;
  let lastError: string | undefined;
  let lastStatus: number | undefined;

  const stopped = (reason: StopReason): RemoteCallResult => ({
    outcome: 'deadline-passed',
    reason,
    attempts,
    ...(lastError === undefined ? {} : { lastError }),
    ...(lastStatus === undefined ? {} : { lastStatus }),
  });
  if (request.signal?.aborted) return stopped('aborted');
  if (msLeft() <= 0) return stopped('deadline');

  // One signal for "stop now": the deadline or the caller, whichever comes first.
  const stop = new AbortController();
  const deadlineTimer = setTimeout(
    () => stop.abort(new StopCallingError('deadline', 'complete-by passed')),
    Math.min(msLeft(), maxTimerMs),
  );
  const onCallerAbort = () => stop.abort(new StopCallingError('aborted', 'the caller aborted'));
  request.signal?.addEventListener('abort', onCallerAbort, { once: true });
  const stopReason = (): StopReason =>
    stop.signal.reason instanceof StopCallingError ? stop.signal.reason.reason : 'deadline';

  // Jittered exponential back-off, stretched to honour Retry-After and to wait out an open
  // circuit, and never past the deadline (cockatiel's retry sleep cannot be interrupted).
  const exponential = new ExponentialBackoff({
    initialDelay: policy.initialDelayMs,
    maxDelay: policy.maxDelayMs,
  });
  let jitter: Cockatiel.IBackoff<Cockatiel.IRetryBackoffContext<unknown>> | undefined;
  const backoff = new DelegateBackoff<Cockatiel.IRetryBackoffContext<unknown>>((context) => {
    jitter = jitter ? jitter.next(context) : exponential.next();
    let delay = jitter.duration;
    const failure = 'error' in context.result ? context.result.error : undefined;
    if (failure instanceof TransientRemoteError && failure.retryAfterMs !== undefined) {
      delay = Math.max(delay, failure.retryAfterMs);
    }
    if (failure instanceof BrokenCircuitError) delay = Math.max(delay, breaker.halfOpensAt - Date.now());
    return Math.max(0, Math.min(delay, msLeft(), msToReport()));
  });

  const retryPolicy = retry(
    handleWhen((error) => {
      if (stop.signal.aborted || error instanceof InterruptedAttemptError) return false;
      if (error instanceof BrokenCircuitError) return true;
      return error instanceof TransientRemoteError && attempts < policy.maxAttempts;
    }),
    { maxAttempts: Number.MAX_SAFE_INTEGER, backoff },
  );
  const attemptPolicy = wrap(breaker.policy, timeout(policy.attemptTimeoutMs, TimeoutStrategy.Cooperative));

  const sendOnce = async (signal: AbortSignal): Promise<AttemptResponse> => {
    attempts++;
    request.onAttempt?.({ number: attempts, startedAt: clock.now() });
    let response: Response;
    let body: unknown;
    try {
      response = await fetch(url, {
        method: 'POST',
        // traceparent: the remote service's own telemetry joins the order's trace.
        headers: injectTraceHeaders({
          'content-type': 'application/json',
          accept: 'application/json, application/problem+json',
          'idempotency-key': request.idempotencyKey,
        }),
        body: payload,
        signal,
      });
      body = await readBody(response);
    } catch (error) {
      if (stop.signal.aborted)
        throw new InterruptedAttemptError(`attempt ${attempts} cut off: ${stopReason()}`);
      if (signal.aborted) {
        throw new TransientRemoteError(`attempt ${attempts} timed out after ${policy.attemptTimeoutMs} ms`);
      }
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new TransientRemoteError(`network error: ${cause?.code ?? cause?.message ?? String(error)}`);
    }
    if (!isTransientStatus(response.status)) return { status: response.status, body };
    const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), clock.now());
    if (response.status === 429 || response.status === 503)
      request.onPushback?.(response.status, retryAfterMs);
    if (retryAfterMs !== undefined && retryAfterMs >= msLeft()) {
      lastError = problemDetail(body);
      lastStatus = response.status;
      throw new StopCallingError(
        'retry-after-beyond-deadline',
        `Retry-After ${retryAfterMs} ms passes complete-by`,
      );
    }
    throw new TransientRemoteError(problemDetail(body), response.status, retryAfterMs);
  };

  const execution = retryPolicy.execute(({ signal }) => {
    // Checked before the breaker, so a call stopped here never counts as a half-open probe.
    if (stop.signal.aborted) throw new StopCallingError(stopReason(), 'stopped before sending');
    // Only after a failure: the first attempt always goes, and a success needs no report.
    if (lastError !== undefined && msToReport() <= 0)
      throw new StopCallingError('report-by', 'time to report');
    return attemptPolicy.execute(({ signal: attemptSignal }) => sendOnce(attemptSignal), signal);
  }, stop.signal);
  retryPolicy.onRetry((failure) => {
    if ('error' in failure)
      lastError = failure.error instanceof Error ? failure.error.message : String(failure.error);
    if (
      'error' in failure &&
      failure.error instanceof TransientRemoteError &&
      failure.error.status !== undefined
    )
      lastStatus = failure.error.status;
  });
  // Returns as soon as the deadline passes, even mid back-off; the background retry loop then
  // finds the stop signal raised and ends without sending anything.
  const stoppedEarly = new Promise<'stopped'>((resolve) => {
    if (stop.signal.aborted) resolve('stopped');
    stop.signal.addEventListener('abort', () => resolve('stopped'), { once: true });
  });
  execution.catch(() => undefined);

  try {
    const result = await Promise.race([execution, stoppedEarly]);
    if (result === 'stopped') return stopped(stopReason());
    if (result.status >= 200 && result.status < 300) {
      return { outcome: 'succeeded', status: result.status, body: result.body, attempts };
    }
    return {
      outcome: 'failed-permanently',
      status: result.status,
      error: problemDetail(result.body),
      body: result.body,
      attempts,
    };
  } catch (error) {
    if (error instanceof StopCallingError) return stopped(error.reason);
    if (error instanceof TransientRemoteError) {
      lastError = error.message;
      if (error.status !== undefined) lastStatus = error.status;
      return stopped(stop.signal.aborted ? stopReason() : 'retries-exhausted');
    }
    if (stop.signal.aborted) return stopped(stopReason());
    throw error;
  } finally {
    clearTimeout(deadlineTimer);
    request.signal?.removeEventListener('abort', onCallerAbort);
  }
}
