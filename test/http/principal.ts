import { principalHeaderValue } from '../../local/host/platformAuth.js';
import { operatorRole } from '../../shared/http/operatorAuth.js';

/**
 * The headers App Service Authentication adds for a signed-in Entra user, for tests that drive a
 * handler directly (no platform in front of it). Such a test also sets WEBSITE_AUTH_ENABLED, as
 * the platform does; over HTTP the local host adds these headers itself.
 */
export function principalHeaders(
  name = 'ops@example.com',
  roles: readonly string[] = [operatorRole],
  id = '55555555-5555-4555-8555-555555555555',
): Record<string, string> {
  return {
    'x-ms-client-principal': principalHeaderValue({ name, id, roles }),
    'x-ms-client-principal-name': name,
    'x-ms-client-principal-id': id,
    'x-ms-client-principal-idp': 'aad',
  };
}

/** Runs `body` with WEBSITE_AUTH_ENABLED as App Service sets it, restoring it afterwards. */
export async function behindPlatformAuth<T>(body: () => Promise<T> | T): Promise<T> {
  const before = process.env.WEBSITE_AUTH_ENABLED;
  process.env.WEBSITE_AUTH_ENABLED = 'true';
  try {
    return await body();
  } finally {
    if (before === undefined) delete process.env.WEBSITE_AUTH_ENABLED;
    else process.env.WEBSITE_AUTH_ENABLED = before;
  }
}
