import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HttpRequest, type HttpResponseInit } from '@azure/functions';
import { operatorRole, requireOperator } from '../../shared/http/operatorAuth.js';
import { principalHeaders } from './principal.js';

/**
 * The operator guard on its own: which principal it trusts, and the answer for everyone else.
 * Pure (headers and settings in, verdict out); the same rules over real HTTP through the local
 * host are in test/security/operatorAuth.test.ts.
 */
const authOn = { WEBSITE_AUTH_ENABLED: 'true' } as NodeJS.ProcessEnv;
const authOff = {} as NodeJS.ProcessEnv;

function req(headers: Record<string, string> = {}, query = ''): HttpRequest {
  return new HttpRequest({ method: 'GET', url: `http://127.0.0.1/api/orders${query}`, headers });
}

function problemOf(response: HttpResponseInit): { status: number; detail: string; type: string } {
  assert.equal((response.headers as Record<string, string>)['Content-Type'], 'application/problem+json');
  return JSON.parse(String(response.body)) as { status: number; detail: string; type: string };
}

function base64(value: unknown): string {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64');
}

test('a principal the platform set, holding the Operator role, is the operator (name and id)', () => {
  const check = requireOperator(req(principalHeaders('ada@example.com')), authOn);
  assert.deepEqual(check, {
    ok: true,
    operator: { name: 'ada@example.com', id: '55555555-5555-4555-8555-555555555555' },
  });
});

test('the same principal is not trusted when platform authentication is off: 401 saying why', () => {
  const check = requireOperator(req(principalHeaders()), authOff);
  assert.equal(check.ok, false);
  if (check.ok) return;
  assert.equal(check.response.status, 401);
  assert.match(problemOf(check.response).detail, /WEBSITE_AUTH_ENABLED/);
  assert.equal((check.response.headers as Record<string, string>)['WWW-Authenticate'], 'Bearer');
});

test('a signed-in principal without the role is a 403 naming the role', () => {
  for (const roles of [[], ['Reader'], ['operator'], [`${operatorRole}s`]]) {
    const check = requireOperator(req(principalHeaders('bob@example.com', roles)), authOn);
    assert.equal(check.ok, false, JSON.stringify(roles));
    if (check.ok) continue;
    assert.equal(check.response.status, 403);
    const p = problemOf(check.response);
    assert.match(p.detail, new RegExp(`${operatorRole} app role`));
    assert.match(p.type, /forbidden$/);
  }
});

test('the role must be under the claim type the principal names (role_typ), else the defaults', () => {
  const own = {
    auth_typ: 'aad',
    role_typ: 'custom-role',
    claims: [
      { typ: 'roles', val: operatorRole },
      { typ: 'custom-role', val: 'Reader' },
    ],
  };
  const headers = { ...principalHeaders(), 'x-ms-client-principal': base64(own) };
  assert.equal(requireOperator(req(headers), authOn).ok, false, "'roles' is not the role claim here");
  const v2 = { auth_typ: 'aad', claims: [{ typ: 'roles', val: operatorRole }] };
  const check = requireOperator(req({ ...principalHeaders(), 'x-ms-client-principal': base64(v2) }), authOn);
  assert.equal(check.ok, true, 'without role_typ, the v2 token claim "roles" counts');
});

test('a function key, by header or ?code=, is a client credential: 403 without a principal', () => {
  for (const env of [authOn, authOff]) {
    const byHeader = requireOperator(req({ 'x-functions-key': 'any' }), env);
    const byQuery = requireOperator(req({}, '?state=Error&code=any'), env);
    for (const check of [byHeader, byQuery]) {
      assert.equal(check.ok, false);
      if (!check.ok) assert.equal(check.response.status, 403);
    }
  }
});

test('nothing at all is a 401 problem', () => {
  const check = requireOperator(req(), authOn);
  assert.equal(check.ok, false);
  if (!check.ok) {
    assert.equal(check.response.status, 401);
    assert.match(problemOf(check.response).type, /unauthenticated$/);
  }
});

test('broken or partial principal headers are nobody (401), never a 500', () => {
  const good = principalHeaders();
  const cases: Array<Record<string, string>> = [
    { ...good, 'x-ms-client-principal': 'not base64 json' },
    { ...good, 'x-ms-client-principal': base64('[1,2]') },
    { ...good, 'x-ms-client-principal': base64({ claims: 'Operator' }) },
    { 'x-ms-client-principal': good['x-ms-client-principal'] }, // without id, name and idp
    // Static Web Apps' shape: not what App Service sends.
    { ...good, 'x-ms-client-principal': base64({ identityProvider: 'aad', userRoles: [operatorRole] }) },
    { ...good, 'x-ms-client-principal-id': '   ' },
  ];
  for (const headers of cases) {
    const check = requireOperator(req(headers), authOn);
    assert.equal(check.ok, false, JSON.stringify(headers));
    if (!check.ok) assert.equal(check.response.status, 401, JSON.stringify(headers));
  }
});

test('an unprintable or overlong name is recorded as the principal id instead', () => {
  for (const name of ['x'.repeat(101), 'tab\there', 'é-operator']) {
    const headers = principalHeaders('ok', [operatorRole], 'id-1');
    headers['x-ms-client-principal-name'] = name;
    const check = requireOperator(req(headers), authOn);
    assert.deepEqual(check, { ok: true, operator: { name: 'id-1', id: 'id-1' } }, name);
  }
});
