import { openApiDocument } from '../shared/http/openapi.js';

/**
 * The routes the operator credential opens, read from the OpenAPI document (the operations it
 * secures with the operator bearer), so the readiness block cannot fall behind a new route. One
 * line per family (first path segment) and method, paths relative to the API base.
 */
export function operatorRouteLines(): string[] {
  const byFamily = new Map<string, Map<string, string[]>>();
  for (const [path, operations] of Object.entries(openApiDocument().paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      if (!JSON.stringify(operation.security ?? []).includes('operatorBearer')) continue;
      const family = path.split('/')[1] ?? '';
      const methods = byFamily.get(family) ?? new Map<string, string[]>();
      byFamily.set(family, methods);
      const verb = method.toUpperCase();
      methods.set(verb, [...(methods.get(verb) ?? []), path]);
    }
  }
  return [...byFamily.values()].flatMap((methods) =>
    [...methods].map(([verb, paths]) => `${verb.padEnd(4)} ${paths.sort().join(' ')}`),
  );
}
