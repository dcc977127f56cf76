import type { ServerResponse } from 'node:http';
import { problem, problemTypes } from '../../shared/http/problem.js';

/**
 * The refusals the platform makes before any function runs (the function key, App Service
 * Authentication's bearer token), answered as RFC 9457 problem+json like the app's own errors.
 * In Azure the Functions host and App Service Authentication send these with an empty body and we
 * cannot change that (docs/operations.md, "Which refusals the app writes"); locally the status and headers are Azure's, and the
 * body says what to send.
 */
function refuse(res: ServerResponse, detail: string, headers: Record<string, string> = {}): void {
  const answer = problem(401, problemTypes.unauthenticated, 'Unauthorized', detail);
  res
    .writeHead(401, { ...(answer.headers as Record<string, string>), ...headers })
    .end(answer.body as string);
}

export function refuseFunctionKey(res: ServerResponse, supplied: boolean): void {
  refuse(
    res,
    `${supplied ? 'The function key is not valid' : 'No function key was sent'}: send the function key in the x-functions-key header or the code query parameter (printed at start-up).`,
  );
}

export function refuseBearerToken(res: ServerResponse): void {
  refuse(
    res,
    'The bearer token is not valid: send the operator key (printed at start-up) as Authorization: Bearer <key>, or no Authorization header for a client call.',
    { 'www-authenticate': 'Bearer error="invalid_token"' },
  );
}
