import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HttpRequest } from '@azure/functions';
import { readJsonBody, jsonDepthExceeds, maxBodyBytes } from '../../shared/http/jsonBody.js';

function request(
  body: string | undefined,
  headers: Record<string, string> = { 'content-type': 'application/json' },
) {
  return new HttpRequest({
    url: 'http://localhost/api/orders',
    method: 'POST',
    headers,
    body: body === undefined ? undefined : { string: body },
  });
}

async function status(req: HttpRequest) {
  const r = await readJsonBody(req);
  if (r.ok) return 200;
  assert.equal((r.response.headers as Record<string, string>)['Content-Type'], 'application/problem+json');
  return r.response.status;
}

test('parses a JSON object', async () => {
  const r = await readJsonBody(request('{"a":1}'));
  assert.deepEqual(r.ok && r.value, { a: 1 });
});

test('415 when not JSON', async () => {
  assert.equal(await status(request('{}', { 'content-type': 'text/plain' })), 415);
  assert.equal(await status(request('{}', {})), 415);
});

test('accepts JSON with parameters and +json types', async () => {
  assert.equal(await status(request('{}', { 'content-type': 'application/json; charset=utf-8' })), 200);
  assert.equal(await status(request('{}', { 'content-type': 'application/merge-patch+json' })), 200);
});

test('413 over the limit, by bytes read', async () => {
  const big = JSON.stringify({ a: 'x'.repeat(maxBodyBytes) });
  assert.equal(await status(request(big)), 413);
});

test('413 on a declared Content-Length over the limit', async () => {
  assert.equal(
    await status(
      request('{}', { 'content-type': 'application/json', 'content-length': String(maxBodyBytes + 1) }),
    ),
    413,
  );
});

test('400 for malformed, empty or deeply nested JSON', async () => {
  assert.equal(await status(request('{"a":')), 400);
  assert.equal(await status(request('')), 400);
  assert.equal(await status(request('['.repeat(1000) + ']'.repeat(1000))), 400);
});

test('depth counting ignores brackets inside strings', () => {
  assert.equal(jsonDepthExceeds(JSON.stringify({ a: '[[[[[[[[[[[[[[[[[[[[[[[[[[' }), 3), false);
  assert.equal(jsonDepthExceeds(JSON.stringify({ a: '\\"[[[[' }), 3), false);
  assert.equal(jsonDepthExceeds('[[[[]]]]', 3), true);
});
