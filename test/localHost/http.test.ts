import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startLocalHost, type LocalHost } from '../../local/host/index.js';
import { writeFixtureApp } from './fixtureApp.js';

/** The platform's own refusals answer RFC 9457 problem+json, like the app's errors. */
async function problemOf(res: Response, status: number): Promise<{ title: string; detail: string }> {
  assert.equal(res.status, status);
  assert.equal(res.headers.get('content-type'), 'application/problem+json');
  const body = (await res.json()) as { type: string; title: string; status: number; detail: string };
  assert.equal(body.status, status);
  assert.equal(typeof body.type, 'string');
  assert.ok(body.title.length > 0 && body.detail.length > 0, JSON.stringify(body));
  return body;
}

describe('local host: HTTP triggers', () => {
  let host: LocalHost;
  const lines: string[] = [];

  before(async () => {
    const appRoot = writeFixtureApp({ files: 'httpFunctions.js' });
    host = await startLocalHost({
      appRoot,
      httpPort: 0,
      functionKey: 'test-key-123',
      operatorKey: 'operator-key-456',
      log: (line) => lines.push(line),
      maxRequestBodyBytes: 1024,
      shutdownGraceMs: 5_000,
    });
  });
  after(async () => {
    await host?.stop();
  });

  it('lists the app registrations with their triggers', () => {
    const names = host.functions.map((f) => `${f.name}:${f.trigger}`);
    assert.deepEqual(names, [
      'boom:http',
      'defaultRoute:http',
      'hello:http',
      'orderById:http',
      'slow:http',
      'upload:http',
    ]);
    assert.match(host.baseUrl, /^http:\/\/127\.0\.0\.1:\d+\/api$/);
    assert.equal(host.functionKey, 'test-key-123');
  });

  it('rejects a function-level route without a key or with a wrong key (401 problem+json naming the key)', async () => {
    for (const init of [{}, { headers: { 'x-functions-key': 'wrong' } }]) {
      const res = await fetch(`${host.baseUrl}/orders/7`, init);
      const problem = await problemOf(res, 401);
      assert.match(problem.detail, /x-functions-key/);
      assert.match(problem.detail, /code/);
    }
    const wrongCode = await fetch(`${host.baseUrl}/orders/7?code=nope`);
    await problemOf(wrongCode, 401);
  });

  it("hands the handler the request's traceparent as its trace context, else a new trace", async () => {
    const traceParent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const traced = await fetch(`${host.baseUrl}/orders/7`, {
      headers: { 'x-functions-key': 'test-key-123', traceparent: traceParent, tracestate: 'k=v' },
    });
    const tracedBody = (await traced.json()) as { traceContext: { traceParent: string; traceState: string } };
    assert.equal(tracedBody.traceContext.traceParent, traceParent);
    assert.equal(tracedBody.traceContext.traceState, 'k=v');
    const untraced = await fetch(`${host.baseUrl}/orders/7`, {
      headers: { 'x-functions-key': 'test-key-123', traceparent: '00-zz-bad-01' },
    });
    const fresh = ((await untraced.json()) as { traceContext: { traceParent: string } }).traceContext
      .traceParent;
    assert.match(fresh, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  });

  it('accepts the key in the x-functions-key header and in the code query parameter', async () => {
    const viaHeader = await fetch(`${host.baseUrl}/orders/7?x=1`, {
      headers: { 'x-functions-key': 'test-key-123', 'x-custom': 'yes' },
    });
    assert.equal(viaHeader.status, 200);
    assert.equal(viaHeader.headers.get('x-fixture'), 'orderById');
    assert.match(viaHeader.headers.get('set-cookie') ?? '', /^session=abc; Path=\/; HttpOnly/);
    const body = (await viaHeader.json()) as Record<string, unknown>;
    assert.equal(body.id, '7');
    assert.equal(body.method, 'GET');
    assert.deepEqual(body.query, { x: '1' });
    assert.equal(body.header, 'yes');

    const viaQuery = await fetch(`${host.baseUrl}/orders/8?code=test-key-123`);
    assert.equal(viaQuery.status, 200);
    assert.equal(((await viaQuery.json()) as { id: string }).id, '8');
  });

  it('plays App Service Authentication: client-sent principal and token headers never reach the app', async () => {
    const forged = Buffer.from(JSON.stringify({ claims: [{ typ: 'roles', val: 'Operator' }] })).toString(
      'base64',
    );
    const res = await fetch(`${host.baseUrl}/orders/7`, {
      headers: {
        'x-functions-key': 'test-key-123',
        'x-ms-client-principal': forged,
        'X-MS-CLIENT-PRINCIPAL-NAME': 'mallory',
        'x-ms-client-principal-idp': 'aad',
        'x-ms-client-principal-id': 'm-1',
        'x-ms-token-aad-access-token': 'stolen',
      },
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.authEnabled, 'true', 'the app is told the platform authenticates');
    assert.equal(body.principalName, null);
    assert.equal(body.principalIdp, null);
    assert.equal(body.token, null);
    assert.equal(body.user, null);
  });

  it('signs the operator credential in as an Entra user with the Operator role; a wrong bearer token is a 401', async () => {
    assert.equal(host.operatorKey, 'operator-key-456');
    const res = await fetch(`${host.baseUrl}/orders/7`, {
      headers: {
        'x-functions-key': 'test-key-123',
        authorization: 'Bearer operator-key-456',
        'x-ms-client-principal-name': 'mallory',
      },
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as {
      principalName: string;
      principalIdp: string;
      user: {
        type: string;
        username: string;
        claimsPrincipalData: { role_typ: string; claims: Array<{ typ: string; val: string }> };
      };
    };
    assert.equal(body.principalName, 'local-operator', 'the forged name is replaced');
    assert.equal(body.principalIdp, 'aad');
    assert.equal(body.user.type, 'AppService');
    assert.equal(body.user.username, 'local-operator');
    const roleTyp = body.user.claimsPrincipalData.role_typ;
    assert.deepEqual(
      body.user.claimsPrincipalData.claims.filter((c) => c.typ === roleTyp).map((c) => c.val),
      ['Operator'],
    );
    const before = lines.length;
    for (const authorization of ['Bearer nope', 'Bearer operator-key-4567', 'bearer ']) {
      const wrong = await fetch(`${host.baseUrl}/orders/7`, {
        headers: { 'x-functions-key': 'test-key-123', authorization },
      });
      if (authorization === 'bearer ') {
        assert.equal(wrong.status, 200, 'no token at all is an anonymous request, as with Easy Auth');
        await wrong.arrayBuffer();
        continue;
      }
      assert.match(wrong.headers.get('www-authenticate') ?? '', /invalid_token/);
      const problem = await problemOf(wrong, 401);
      assert.match(problem.detail, /bearer token/i);
    }
    assert.equal(
      lines.slice(before).filter((l) => l.includes('Executing')).length,
      1,
      'a refused token never reaches the function',
    );
  });

  it('passes the request body and method through', async () => {
    const res = await fetch(`${host.baseUrl}/orders/9`, {
      method: 'PUT',
      headers: { 'x-functions-key': 'test-key-123', 'content-type': 'text/plain' },
      body: 'payload text',
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.method, 'PUT');
    assert.equal(body.body, 'payload text');
  });

  it('applies route constraints, optional parameters, default routes and methods (404 otherwise)', async () => {
    const notInt = await fetch(`${host.baseUrl}/orders/abc`, {
      headers: { 'x-functions-key': 'test-key-123' },
    });
    assert.equal(notInt.status, 404);
    const wrongMethod = await fetch(`${host.baseUrl}/orders/7`, {
      method: 'DELETE',
      headers: { 'x-functions-key': 'test-key-123' },
    });
    assert.equal(wrongMethod.status, 404);
    assert.deepEqual(await (await fetch(`${host.baseUrl}/hello/ada`)).json(), { hello: 'ada' });
    assert.deepEqual(await (await fetch(`${host.baseUrl}/HELLO`)).json(), { hello: 'world' });
    assert.equal(await (await fetch(`${host.baseUrl}/defaultRoute`)).text(), 'default route');
    assert.equal((await fetch(`${host.baseUrl}/nope`)).status, 404);
    assert.equal((await fetch(`${host.baseUrl.replace(/\/api$/, '')}/hello/ada`)).status, 404);
  });

  it('answers 500 without the error in the body when a handler throws, and logs the stack', async () => {
    const res = await fetch(`${host.baseUrl}/boom`);
    assert.equal(res.status, 500);
    const text = await res.text();
    assert.equal(text, '');
    assert.ok(lines.some((l) => l.includes('[Warning] boom (') && l.includes('about to fail')));
    assert.ok(
      lines.some((l) => l.includes("Executed 'Functions.boom' (Failed") && l.includes('fixture exploded')),
    );
  });

  it('prints user logs with the function name, the invocation id and structured arguments as JSON', () => {
    const line = lines.find((l) => l.includes('reading order'));
    assert.ok(line, 'the orderById log line');
    assert.match(
      line,
      /^\d{4}-\d\d-\d\dT\S+Z \[Information\] orderById \([0-9a-f-]{36}\): reading order \{"id":"7"\}$/,
    );
  });

  it('rejects a body over the size limit with 413 and accepts one under it', async () => {
    const small = await fetch(`${host.baseUrl}/upload`, { method: 'POST', body: Buffer.alloc(1000, 1) });
    assert.equal(small.status, 201);
    assert.deepEqual(await small.json(), { bytes: 1000 });
    const big = await fetch(`${host.baseUrl}/upload`, { method: 'POST', body: Buffer.alloc(5000, 1) }).catch(
      (err: Error) => err,
    );
    // The host may close the connection while the client is still sending; either way nothing ran.
    if (big instanceof Error) assert.ok(!lines.some((l) => l.includes('bytes: 5000')));
    else assert.equal(big.status, 413);
  });
});
