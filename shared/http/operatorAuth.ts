import type { HttpRequest, HttpResponseInit } from '@azure/functions';
import { z } from 'zod';
import { platformAuthenticates } from '../orders/callerScope.js';
import { problem, problemTypes } from './problem.js';

/**
 * Operators are not clients. A client holds a function key and may submit and read orders; an
 * operator is a person signed in through App Service Authentication (Entra ID) who holds the
 * `Operator` app role. Operator routes are `authLevel: 'anonymous'` because the Functions host
 * checks keys before any code runs and an Entra sign-in never satisfies a function key; this guard
 * is then the only door, and it trusts the platform's principal headers only when the platform
 * set them (WEBSITE_AUTH_ENABLED: App Service strips client-sent copies; nothing else does).
 */

/** The app role an Entra sign-in needs for every operator route (infra/hooks creates it). */
export const operatorRole = 'Operator';

/** Who acted, as recorded on the order (`by` of OperatorResubmit / OperatorCancel). */
export interface Operator {
  id: string;
  name: string;
}

export type OperatorCheck = { ok: true; operator: Operator } | { ok: false; response: HttpResponseInit };

/** Role claim types App Service uses when the principal does not name its own (`role_typ`). */
const defaultRoleClaimTypes = ['roles', 'http://schemas.microsoft.com/ws/2008/06/identity/claims/role'];

const principalSchema = z.object({
  role_typ: z.string().optional(),
  claims: z.array(z.object({ typ: z.string(), val: z.string() })).default([]),
});

const namePattern = /^[\x20-\x7e]{1,100}$/;

interface SignedIn {
  id: string;
  name: string;
  roles: string[];
}

/** The platform's principal, or undefined when there is none it vouches for. */
function signedIn(request: HttpRequest, env: NodeJS.ProcessEnv): SignedIn | undefined {
  if (!platformAuthenticates(env)) return undefined;
  let user: HttpRequest['user'];
  try {
    user = request.user;
  } catch {
    return undefined; // the principal header without the id/name/idp headers App Service always adds
  }
  if (!user || user.type !== 'AppService') return undefined;
  const parsed = principalSchema.safeParse(user.claimsPrincipalData);
  if (!parsed.success) return undefined;
  const roleTypes = parsed.data.role_typ ? [parsed.data.role_typ] : defaultRoleClaimTypes;
  const roles = parsed.data.claims.filter((c) => roleTypes.includes(c.typ)).map((c) => c.val);
  const id = user.id.trim();
  const name = namePattern.test(user.username) ? user.username : id;
  return id ? { id, name, roles } : undefined;
}

/** A function key on the request: the caller is a client, whether or not the key is valid. */
function presentsFunctionKey(request: HttpRequest): boolean {
  return Boolean(request.headers.get('x-functions-key')?.trim() || request.query.get('code')?.trim());
}

/**
 * The one guard of every operator route: the operator, or the answer to give instead. 401 when
 * nobody the platform vouches for is signed in (and no function key was sent); 403 for a signed-in
 * principal without the role, and for a function key, which is a client's credential.
 */
/**
 * An action (any method but GET/HEAD/OPTIONS) a browser sent on behalf of another site. In Azure
 * an operator's browser carries App Service Authentication's session cookie, and a page elsewhere
 * can make it POST with that cookie (a form needs no CORS); the browser marks such a request with
 * `Sec-Fetch-Site: cross-site` / `same-site` and an `Origin` of the other site. Clients outside a
 * browser (curl, scripts) send neither and are not affected.
 */
function crossSiteAction(request: HttpRequest): string | undefined {
  if (['GET', 'HEAD', 'OPTIONS'].includes(request.method.toUpperCase())) return undefined;
  const fetchSite = request.headers.get('sec-fetch-site')?.toLowerCase();
  if (fetchSite === 'cross-site' || fetchSite === 'same-site') return `Sec-Fetch-Site is ${fetchSite}`;
  const origin = request.headers.get('origin');
  if (origin === null) return undefined;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return `Origin ${JSON.stringify(origin.slice(0, 100))} is not a URL`;
  }
  const own = request.headers.get('x-forwarded-host') ?? new URL(request.url).host;
  return host === own ? undefined : `Origin ${host} is not this app (${own})`;
}

export function requireOperator(request: HttpRequest, env: NodeJS.ProcessEnv = process.env): OperatorCheck {
  const foreign = crossSiteAction(request);
  if (foreign !== undefined) {
    return {
      ok: false,
      response: problem(
        403,
        problemTypes.forbidden,
        'Cross-site request refused',
        `${foreign}: operator actions are taken from this app's own pages or from outside a browser.`,
      ),
    };
  }
  const principal = signedIn(request, env);
  if (principal?.roles.includes(operatorRole)) {
    return { ok: true, operator: { id: principal.id, name: principal.name } };
  }
  if (principal) {
    return {
      ok: false,
      response: problem(
        403,
        problemTypes.forbidden,
        'Operators only',
        `${principal.name} is signed in but does not hold the ${operatorRole} app role. Ask an administrator to assign it.`,
      ),
    };
  }
  if (presentsFunctionKey(request)) {
    return {
      ok: false,
      response: problem(
        403,
        problemTypes.forbidden,
        'Operators only',
        `A function key is a client credential; this route needs an operator signed in with the ${operatorRole} app role.`,
      ),
    };
  }
  const response = problem(
    401,
    problemTypes.unauthenticated,
    'Operator sign-in required',
    platformAuthenticates(env)
      ? `Sign in as an operator (the ${operatorRole} app role) and send the request again.`
      : 'Operator routes need App Service Authentication (WEBSITE_AUTH_ENABLED), which is off here: no caller can be an operator.',
  );
  (response.headers as Record<string, string>)['WWW-Authenticate'] = 'Bearer';
  return { ok: false, response };
}
