import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mintToken, verifyToken } from '../../shared/callbacks/token.js';
import { SettingsError } from '../../shared/config/settings.js';
import { loadWaitingSettings, parseSigningKeys } from '../../shared/config/waitingSettings.js';

const secret = () => randomBytes(32).toString('base64');
const claims = {
  orderId: '3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b',
  step: 'payment',
  run: 1,
  attempt: 2,
  expiresAt: new Date('2030-01-01T01:00:00Z'),
};
const now = new Date('2030-01-01T00:00:00Z');

test('a minted token verifies with its claims; altered, foreign-key and expired tokens do not', () => {
  const keys = parseSigningKeys(`k1:${secret()}`);
  const token = mintToken(keys, claims);
  const ok = verifyToken(keys, token, now);
  assert.ok(ok.ok);
  assert.deepEqual(ok.claims, claims);
  const [p, kid, payload, sig] = token.split('.');
  const other = Buffer.from(
    JSON.stringify({ o: claims.orderId, s: 'shipping', r: 1, a: 2, e: 1893459600 }),
  ).toString('base64url');
  assert.deepEqual(verifyToken(keys, `${p}.${kid}.${other}.${sig}`, now), {
    ok: false,
    reason: 'bad-signature',
  });
  assert.deepEqual(verifyToken(keys, `${p}.k9.${payload}.${sig}`, now), { ok: false, reason: 'unknown-key' });
  assert.deepEqual(verifyToken(parseSigningKeys(`k1:${secret()}`), token, now), {
    ok: false,
    reason: 'bad-signature',
  });
  assert.deepEqual(verifyToken(keys, token, new Date(claims.expiresAt.getTime() + 1)), {
    ok: false,
    reason: 'expired',
  });
  assert.deepEqual(verifyToken(keys, 'cb1.k1.x', now), { ok: false, reason: 'malformed' });
});

test('rotation: a token signed by the old key verifies while both are listed, not after', () => {
  const oldKey = `old:${secret()}`;
  const newKey = `new:${secret()}`;
  const token = mintToken(parseSigningKeys(oldKey), claims);
  const both = parseSigningKeys(`${newKey},${oldKey}`);
  assert.ok(verifyToken(both, token, now).ok);
  assert.match(mintToken(both, claims), /^cb1\.new\./, 'the first key signs');
  assert.equal(verifyToken(parseSigningKeys(newKey), token, now).ok, false);
});

test('bad settings fail naming the setting', () => {
  const bad: Array<Record<string, string>> = [
    { CALLBACK_SIGNING_KEYS: 'k1:short' },
    { CALLBACK_SIGNING_KEYS: `k1:${secret()},k2:${secret()},k3:${secret()}` },
    { CALLBACK_SIGNING_KEYS: `:${secret()}` },
    { CALLBACK_SIGNING_KEYS: `a:${secret()},a:${secret()}` },
    { CALLBACK_BASE_URL: 'not a url' },
    { CALLBACK_GRACE_SECONDS: '-1' },
    { NEW_ORDER_WORKFLOW_VERSION: 'two' },
  ];
  for (const env of bad) {
    const name = Object.keys(env)[0];
    assert.throws(
      () => loadWaitingSettings(env),
      (e: unknown) => e instanceof SettingsError && e.setting === name,
      name,
    );
  }
  assert.throws(
    () => loadWaitingSettings({}, true),
    (e: unknown) => e instanceof SettingsError && e.setting === 'CALLBACK_SIGNING_KEYS',
  );
  assert.deepEqual(loadWaitingSettings({}).signingKeys, []);
});
