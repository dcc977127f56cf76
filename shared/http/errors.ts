import type { HttpResponseInit, InvocationContext } from '@azure/functions';
import { logger } from '../observability/logger.js';
import { problem, problemTypes, retryAfter } from './problem.js';

function isUnavailable(e: unknown): boolean {
  const err = e as { statusCode?: number; code?: string; name?: string };
  if (typeof err?.statusCode === 'number' && (err.statusCode >= 500 || err.statusCode === 429)) return true;
  if (err?.name === 'TooManyConflicts') return true;
  return [
    'ECONNREFUSED',
    'ECONNRESET',
    'ETIMEDOUT',
    'ServiceUnavailable',
    'ServiceCommunicationProblem',
  ].includes(err?.code ?? '');
}

/**
 * The last line of defence of every route: an unexpected failure becomes problem+json without a
 * stack trace (503 with Retry-After when a dependency is down or busy, 500 otherwise), and the
 * full error goes to the log under the invocation id the client sees.
 */
export async function withProblemErrors(
  context: InvocationContext,
  handler: () => Promise<HttpResponseInit>,
): Promise<HttpResponseInit> {
  try {
    return await handler();
  } catch (e) {
    const log = logger(context, { actor: 'http' });
    log.error('request failed', { error: (e as Error)?.message, stack: (e as Error)?.stack });
    if (isUnavailable(e)) {
      return retryAfter(
        problem(
          503,
          problemTypes.busy,
          'Temporarily unavailable',
          'A backing service is unavailable or busy. Retry shortly.',
          { invocationId: context.invocationId },
        ),
        5,
      );
    }
    return problem(
      500,
      problemTypes.internal,
      'Internal error',
      'The request could not be completed. Quote the invocation id when reporting this.',
      { invocationId: context.invocationId },
    );
  }
}
