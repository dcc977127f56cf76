import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import type { Dependencies } from '../app/ports.js';
import { isOrderId } from '../domain/orderId.js';
import { orderView } from '../orders/orderView.js';
import { requireOperator } from './operatorAuth.js';
import { problem, problemTypes } from './problem.js';
import { purgedOrderView } from './retentionApi.js';

/**
 * The operator's console: one HTML page and its two built assets, served by the function app
 * itself (no second server). The page is guarded like every operator route; the assets are code
 * built by `npm run build` (scripts/build-console.mjs), the same for everyone and without data,
 * so they are anonymous like the OpenAPI document: every request the console makes for data goes
 * to an operator route and meets requireOperator there.
 */

/** Where `npm run build` writes the bundle: dist/console, next to dist/shared. */
const assetDir = join(__dirname, '..', '..', 'console');

export const consoleAssets = {
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
} as const;
type AssetName = keyof typeof consoleAssets;

const loaded = new Map<AssetName, Buffer>();
function asset(name: AssetName): Buffer {
  let body = loaded.get(name);
  if (!body) {
    body = readFileSync(join(assetDir, name));
    loaded.set(name, body);
  }
  return body;
}

/** Scripts and styles from this origin only: the page never runs or loads anything else. */
const pageHeaders = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

/**
 * How an operator signs in where the page is refused: in Azure, App Service Authentication's
 * Entra ID login (its session cookie then reaches every route); locally, the operator key the
 * stack prints, kept in the tab's sessionStorage and sent as `Authorization: Bearer` by fetch,
 * because a browser cannot add that header to a navigation.
 */
function signInMode(env: NodeJS.ProcessEnv): 'entra' | 'key' {
  // App Service sets WEBSITE_HOSTNAME on every site; the local host does not.
  return env.WEBSITE_HOSTNAME ? 'entra' : 'key';
}

function page(mode: 'console' | 'entra' | 'key'): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Order processing console</title>
<link rel="stylesheet" href="console/assets/app.css">
<script type="module" src="console/assets/app.js"></script>
</head>
<body data-mode="${mode}">
<noscript>The operator console needs JavaScript.</noscript>
<main id="app"></main>
</body>
</html>
`;
}

function wantsHtml(request: HttpRequest): boolean {
  return /text\/html/i.test(request.headers.get('accept') ?? '');
}

/** GET /api/console: the page for an operator; a sign-in page (still 401) for a browser without one. */
export function consolePage(request: HttpRequest, env: NodeJS.ProcessEnv = process.env): HttpResponseInit {
  const guard = requireOperator(request, env);
  if (guard.ok) return { status: 200, headers: pageHeaders, body: page('console') };
  if (guard.response.status === 401 && wantsHtml(request)) {
    return {
      status: 401,
      headers: { ...pageHeaders, 'WWW-Authenticate': 'Bearer' },
      body: page(signInMode(env)),
    };
  }
  return guard.response;
}

/** GET /api/console/assets/{file}: the bundle. */
export function consoleAsset(request: HttpRequest): HttpResponseInit {
  const file = request.params.file;
  if (!Object.hasOwn(consoleAssets, file)) {
    return problem(404, problemTypes.notFound, 'No such console asset', `The console has no file ${file}.`);
  }
  const name = file as AssetName;
  return {
    status: 200,
    headers: {
      'Content-Type': consoleAssets[name],
      'Cache-Control': 'no-cache',
      'X-Content-Type-Options': 'nosniff',
    },
    body: asset(name),
  };
}

/**
 * GET /api/console/orders/{orderId}: the order as GET /api/orders/{orderId} shows it to its
 * client, for an operator. The client route takes a function key, which an operator never holds.
 */
export async function consoleOrder(
  deps: Dependencies,
  request: HttpRequest,
  _context?: InvocationContext,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const orderId = request.params.orderId;
  if (!isOrderId(orderId)) {
    return problem(
      400,
      problemTypes.validation,
      'Invalid order id',
      'The order id is not a lower-case UUID.',
    );
  }
  const loaded = await deps.store.load(orderId);
  if (!loaded) {
    // A purged order answers from its archive (shared/http/retentionApi.ts).
    const archived = await purgedOrderView(deps, request, orderId);
    if (archived) return archived;
    return problem(404, problemTypes.notFound, 'Order not found', `No order ${orderId} is recorded.`);
  }
  return {
    status: 200,
    headers: { 'Cache-Control': 'no-store' },
    jsonBody: orderView(loaded.order, loaded.state),
  };
}
