import { timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * The local stand-in for App Service Authentication ("Easy Auth") with unauthenticated requests
 * allowed through, which is how the app runs in Azure. Like Easy Auth, it runs before routing and
 * keys: it removes every client-sent principal and token header, so the app can trust those
 * headers; a request bearing the operator credential (`Authorization: Bearer <operator key>`, the
 * local counterpart of an Entra access token) gets the principal headers App Service would add
 * for a signed-in Entra user holding the operator role; a bearer token that is not valid is
 * refused with 401, as Easy Auth refuses a token it cannot validate.
 */

export interface LocalOperator {
  key: string;
  /** The signed-in name the app sees (x-ms-client-principal-name). */
  name: string;
  id: string;
  roles: readonly string[];
}

export type PlatformAuthOutcome = 'anonymous' | 'operator' | 'invalid-token';

/** Claim types as App Service writes them for an Entra ID sign-in. */
const nameClaim = 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name';
const roleClaim = 'http://schemas.microsoft.com/ws/2008/06/identity/claims/role';

function isPlatformHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return lower.startsWith('x-ms-client-principal') || lower.startsWith('x-ms-token-');
}

function bearerToken(headers: IncomingHttpHeaders): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? '');
  return match?.[1];
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The base64 JSON App Service sends as x-ms-client-principal. */
export function principalHeaderValue(operator: Omit<LocalOperator, 'key'>): string {
  const principal = {
    auth_typ: 'aad',
    name_typ: nameClaim,
    role_typ: roleClaim,
    claims: [
      { typ: nameClaim, val: operator.name },
      { typ: 'http://schemas.microsoft.com/identity/claims/objectidentifier', val: operator.id },
      ...operator.roles.map((role) => ({ typ: roleClaim, val: role })),
    ],
  };
  return Buffer.from(JSON.stringify(principal)).toString('base64');
}

/** Rewrites the request's headers in place, as Easy Auth does before the host sees them. */
export function applyPlatformAuth(
  headers: IncomingHttpHeaders,
  operator: LocalOperator,
): PlatformAuthOutcome {
  for (const name of Object.keys(headers)) if (isPlatformHeader(name)) delete headers[name];
  const token = bearerToken(headers);
  if (token === undefined) return 'anonymous';
  if (!same(token, operator.key)) return 'invalid-token';
  headers['x-ms-client-principal'] = principalHeaderValue(operator);
  headers['x-ms-client-principal-name'] = operator.name;
  headers['x-ms-client-principal-id'] = operator.id;
  headers['x-ms-client-principal-idp'] = 'aad';
  return 'operator';
}
