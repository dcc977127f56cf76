/**
 * Whose Idempotency-Key this is. Order ids are derived from (caller, key), so two callers who
 * happen to pick the same key get two orders and a conflict can only ever concern the caller's
 * own order.
 *
 * - Behind App Service Authentication (the platform sets WEBSITE_AUTH_ENABLED), the caller is the
 *   signed-in principal, `x-ms-client-principal-id`: the platform strips client-sent copies of
 *   that header, so only there can it be trusted.
 * - Otherwise a function key is all that authenticates a request, and Node functions are not told
 *   which key matched (the library exposes no claims), so callers sharing a key name themselves
 *   with the `X-Client-Id` header.
 * - With neither, the caller is unscoped: the key alone derives the id, as before scoping existed.
 */
export type CallerScope = { ok: true; scope: string } | { ok: false; detail: string };

export const clientIdHeader = 'x-client-id';
export const principalIdHeader = 'x-ms-client-principal-id';

const clientIdPattern = /^[\x21-\x7e]{1,128}$/;

export function platformAuthenticates(env: NodeJS.ProcessEnv = process.env): boolean {
  return /^(true|1)$/i.test(env.WEBSITE_AUTH_ENABLED?.trim() ?? '');
}

export function callerScope(
  header: (name: string) => string | null,
  env: NodeJS.ProcessEnv = process.env,
): CallerScope {
  const principal = platformAuthenticates(env) ? header(principalIdHeader)?.trim() : undefined;
  if (principal) return { ok: true, scope: `principal:${principal}` };
  const clientId = header(clientIdHeader);
  if (clientId === null) return { ok: true, scope: '' };
  if (!clientIdPattern.test(clientId)) {
    return {
      ok: false,
      detail: 'The X-Client-Id header must be 1 to 128 visible ASCII characters (no spaces).',
    };
  }
  return { ok: true, scope: `client:${clientId}` };
}
