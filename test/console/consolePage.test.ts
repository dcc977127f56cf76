import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HttpRequest } from '@azure/functions';
import { principalHeaderValue } from '../../local/host/platformAuth.js';
import type { Dependencies } from '../../shared/app/ports.js';
import { consoleAsset, consoleOrder, consolePage } from '../../shared/http/consoleApi.js';

/**
 * The console's HTTP answers without a stack: who gets the page, who gets the sign-in page, who
 * is refused, and which files are served. (The browser tests drive the same routes for real.)
 */
const behindAuth = { WEBSITE_AUTH_ENABLED: 'true' } as NodeJS.ProcessEnv;

function req(headers: Record<string, string> = {}, params: Record<string, string> = {}, path = 'console') {
  return new HttpRequest({ method: 'GET', url: `http://127.0.0.1/api/${path}`, headers, params });
}

function principal(roles: string[]): Record<string, string> {
  const operator = { name: 'ada@example.com', id: 'oid-1', roles };
  return {
    'x-ms-client-principal': principalHeaderValue(operator),
    'x-ms-client-principal-name': operator.name,
    'x-ms-client-principal-id': operator.id,
    'x-ms-client-principal-idp': 'aad',
  };
}

const header = (r: { headers?: unknown }, name: string) => (r.headers as Record<string, string>)[name];

describe('GET /api/console', () => {
  it('serves the page to a signed-in operator, scripts from the app only', () => {
    const answer = consolePage(req(principal(['Operator'])), behindAuth);
    assert.equal(answer.status, 200);
    assert.match(header(answer, 'Content-Type'), /text\/html/);
    assert.match(header(answer, 'Content-Security-Policy'), /script-src 'self'/);
    assert.match(header(answer, 'Content-Security-Policy'), /frame-ancestors 'none'/);
    assert.match(String(answer.body), /data-mode="console"/);
    assert.match(String(answer.body), /src="console\/assets\/app\.js"/);
  });

  it('answers a browser without a sign-in 401 with the sign-in page: the key form locally, Entra ID in Azure', () => {
    const local = consolePage(req({ accept: 'text/html,application/xhtml+xml' }), behindAuth);
    assert.equal(local.status, 401);
    assert.equal(header(local, 'WWW-Authenticate'), 'Bearer');
    assert.match(String(local.body), /data-mode="key"/);
    const azure = consolePage(req({ accept: 'text/html' }), {
      ...behindAuth,
      WEBSITE_HOSTNAME: 'app.azurewebsites.net',
    });
    assert.equal(azure.status, 401);
    assert.match(String(azure.body), /data-mode="entra"/);
  });

  it('answers a script without a sign-in with the problem, and refuses a client key and a role-less sign-in (403)', () => {
    const script = consolePage(req({ accept: 'application/json' }), behindAuth);
    assert.equal(script.status, 401);
    assert.match(header(script, 'Content-Type'), /problem\+json/);
    const client = consolePage(req({ accept: 'text/html', 'x-functions-key': 'k' }), behindAuth);
    assert.equal(client.status, 403);
    assert.match(header(client, 'Content-Type'), /problem\+json/);
    const noRole = consolePage(req({ accept: 'text/html', ...principal(['Reader']) }), behindAuth);
    assert.equal(noRole.status, 403);
    // Without App Service Authentication nobody can be an operator, whatever headers say.
    const spoofed = consolePage(req({ accept: 'application/json', ...principal(['Operator']) }), {});
    assert.equal(spoofed.status, 401);
  });
});

describe('GET /api/console/assets/{file}', () => {
  it('serves the built script and style with their types, and nothing else', () => {
    const js = consoleAsset(req({}, { file: 'app.js' }));
    assert.equal(js.status, 200);
    assert.match(header(js, 'Content-Type'), /^text\/javascript/);
    assert.ok((js.body as Buffer).length > 1000, 'the bundle is built');
    const css = consoleAsset(req({}, { file: 'app.css' }));
    assert.match(header(css, 'Content-Type'), /^text\/css/);
    for (const file of ['app.js.map', '..', 'constructor', '__proto__', 'index.html']) {
      assert.equal(consoleAsset(req({}, { file })).status, 404, file);
    }
  });
});

describe('GET /api/console/orders/{orderId}', () => {
  it('refuses without the operator before reading anything', async () => {
    const unread = new Proxy({} as Dependencies, {
      get: () => assert.fail('the store was read for a refused request'),
    });
    const answer = await consoleOrder(
      unread,
      req({ 'x-functions-key': 'k' }, { orderId: 'x' }, 'console/orders/x'),
    );
    assert.equal(answer.status, 403);
  });
});
