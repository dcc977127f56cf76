/**
 * How the Agent's remote-call client classifies what went wrong with one attempt.
 * Transient: worth another attempt (network error, attempt timeout, 408, 429, 5xx).
 * Anything else the service answers (other 4xx) is a permanent answer, not an error here.
 */

/** A failed attempt that another attempt might fix. */
export class TransientRemoteError extends Error {
  constructor(
    message: string,
    readonly status?: number,
    /** From a Retry-After header: the service asked us to wait this long. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'TransientRemoteError';
  }
}

/**
 * The attempt was cut off by the deadline or the caller, mid-flight. The circuit breaker counts it
 * (the service did not answer in time), but it is never retried.
 */
export class InterruptedAttemptError extends TransientRemoteError {
  constructor(message: string) {
    super(message);
    this.name = 'InterruptedAttemptError';
  }
}

export type StopReason =
  | 'deadline'
  | 'aborted'
  | 'retries-exhausted'
  | 'retry-after-beyond-deadline'
  /** A failed attempt would be retried after `reportBy`: the caller wants to report instead. */
  | 'report-by';

/** Ends the call without another attempt and without a reply: the Agent stops silently. */
export class StopCallingError extends Error {
  constructor(
    readonly reason: StopReason,
    detail: string,
  ) {
    super(detail);
    this.name = 'StopCallingError';
  }
}

export function isTransientStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/** Retry-After as milliseconds: delta-seconds or an HTTP-date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: Date): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now.getTime());
}

/**
 * What the service said, from a problem+json body (RFC 9457) or the raw text. Without the status:
 * it travels beside the text (reply, alert, log), and whoever shows both puts it in front once.
 */
export function problemDetail(body: unknown): string {
  if (body && typeof body === 'object') {
    const p = body as { title?: unknown; detail?: unknown };
    const parts = [p.title, p.detail].filter((s): s is string => typeof s === 'string' && s !== '');
    if (parts.length > 0) return parts.join(': ');
  }
  if (typeof body === 'string' && body !== '') return body.slice(0, 500);
  return 'no body in the answer';
}
