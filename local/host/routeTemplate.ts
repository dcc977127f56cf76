/**
 * ASP.NET-style route templates as the Functions host reads them: `orders/{id}`, optional
 * `{id?}`, constrained `{id:guid}`, catch-all `{*rest}`. Literals match case-insensitively.
 */
type Constraint = (value: string) => boolean;

interface ParamSegment {
  kind: 'param';
  name: string;
  optional: boolean;
  catchAll: boolean;
  constraints: Constraint[];
}
type Segment = { kind: 'literal'; text: string } | ParamSegment;

export interface RouteTemplate {
  template: string;
  segments: Segment[];
  /** Lower sorts first: literals beat constrained params beat plain params beat catch-alls. */
  precedence: number[];
}

const guid = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const bracedGuid = /^[{(][0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}[})]$/i;

function integerIn(min: bigint, max: bigint): Constraint {
  return (v) => /^[-+]?\d+$/.test(v) && BigInt(v) >= min && BigInt(v) <= max;
}
const isNumber: Constraint = (v) => v.trim() !== '' && Number.isFinite(Number(v));

function constraintOf(text: string, template: string): Constraint {
  const match = /^([a-z]+)(?:\((.*)\))?$/i.exec(text);
  const name = match?.[1]?.toLowerCase();
  const args = (match?.[2] ?? '').split(',').map((a) => a.trim());
  const n = (i: number): number => {
    const value = Number(args[i]);
    if (!Number.isFinite(value)) throw new Error(`Route "${template}": constraint "${text}" needs a number.`);
    return value;
  };
  switch (name) {
    case 'int':
      return integerIn(-(2n ** 31n), 2n ** 31n - 1n);
    case 'long':
      return integerIn(-(2n ** 63n), 2n ** 63n - 1n);
    case 'bool':
      return (v) => /^(true|false)$/i.test(v);
    case 'guid':
      return (v) => guid.test(v) || bracedGuid.test(v);
    case 'alpha':
      return (v) => /^[a-z]+$/i.test(v);
    case 'double':
    case 'float':
    case 'decimal':
      return isNumber;
    case 'datetime':
      return (v) => !Number.isNaN(Date.parse(v));
    case 'minlength':
      return (v) => v.length >= n(0);
    case 'maxlength':
      return (v) => v.length <= n(0);
    case 'length':
      return args.length > 1 ? (v) => v.length >= n(0) && v.length <= n(1) : (v) => v.length === n(0);
    case 'min':
      return (v) => isNumber(v) && Number(v) >= n(0);
    case 'max':
      return (v) => isNumber(v) && Number(v) <= n(0);
    case 'range':
      return (v) => isNumber(v) && Number(v) >= n(0) && Number(v) <= n(1);
    default:
      throw new Error(`Route "${template}": the local host does not support the route constraint "${text}".`);
  }
}

export function parseRouteTemplate(template: string): RouteTemplate {
  const trimmed = template.replace(/^\/+|\/+$/g, '');
  const segments: Segment[] = [];
  const parts = trimmed === '' ? [] : trimmed.split('/');
  parts.forEach((part, index) => {
    const param = /^\{(\*{1,2})?([A-Za-z_][A-Za-z0-9_]*)((?::[^:?}]+(?:\([^)]*\))?)*)(\?)?\}$/.exec(part);
    if (!param) {
      if (/[{}]/.test(part)) {
        throw new Error(
          `Route "${template}": segment "${part}" mixes text and parameters, which the local host does not support.`,
        );
      }
      segments.push({ kind: 'literal', text: part });
      return;
    }
    const [, star, name, constraintText, optional] = param;
    const catchAll = star !== undefined;
    if (catchAll && index !== parts.length - 1)
      throw new Error(`Route "${template}": a catch-all must be the last segment.`);
    const constraints = constraintText
      .split(':')
      .filter(Boolean)
      .map((c) => constraintOf(c, template));
    segments.push({
      kind: 'param',
      name,
      optional: optional !== undefined || catchAll,
      catchAll,
      constraints,
    });
  });
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i];
    if (
      s.kind === 'param' &&
      s.optional &&
      !s.catchAll &&
      segments.slice(i + 1).some((t) => t.kind === 'literal' || !t.optional)
    ) {
      throw new Error(`Route "${template}": only trailing parameters can be optional.`);
    }
  }
  const precedence = segments.map((s) =>
    s.kind === 'literal' ? 0 : s.catchAll ? 4 : s.optional ? 3 : s.constraints.length > 0 ? 1 : 2,
  );
  return { template: trimmed, segments, precedence };
}

/** Route values for a path (already split into decoded segments), or undefined when it does not match. */
export function matchRoute(route: RouteTemplate, pathSegments: string[]): Record<string, string> | undefined {
  const params: Record<string, string> = {};
  let i = 0;
  for (const segment of route.segments) {
    if (segment.kind === 'literal') {
      if (i >= pathSegments.length || pathSegments[i].toLowerCase() !== segment.text.toLowerCase())
        return undefined;
      i++;
      continue;
    }
    if (segment.catchAll) {
      const rest = pathSegments.slice(i).join('/');
      if (rest !== '') {
        if (!segment.constraints.every((c) => c(rest))) return undefined;
        params[segment.name] = rest;
      }
      i = pathSegments.length;
      continue;
    }
    if (i >= pathSegments.length) {
      if (segment.optional) continue;
      return undefined;
    }
    const value = pathSegments[i];
    if (!segment.constraints.every((c) => c(value))) return undefined;
    params[segment.name] = value;
    i++;
  }
  return i === pathSegments.length ? params : undefined;
}

export function comparePrecedence(a: RouteTemplate, b: RouteTemplate): number {
  const length = Math.max(a.precedence.length, b.precedence.length);
  for (let i = 0; i < length; i++) {
    const pa = a.precedence[i] ?? -1;
    const pb = b.precedence[i] ?? -1;
    if (pa !== pb) return pa - pb;
  }
  return 0;
}
