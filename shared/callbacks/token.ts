import { createHmac, timingSafeEqual } from 'node:crypto';
import type { CallbackTarget } from '../domain/index.js';

/**
 * The callback token: the only credential a remote service holds for one attempt of one step.
 * `cb1.<keyId>.<payload>.<signature>`, payload = base64url JSON of the order, step, run, attempt
 * and expiry (epoch seconds), signature = HMAC-SHA256 over `cb1.<keyId>.<payload>` with the key
 * named. Two keys may be valid at once (rotation): the first signs, every listed key verifies.
 */
export interface SigningKey {
  id: string;
  secret: Buffer;
}

export interface TokenClaims extends CallbackTarget {
  /** Not accepted after this instant (complete-by's longest reach plus the grace). */
  expiresAt: Date;
}

export type TokenCheck =
  | { ok: true; claims: TokenClaims }
  | { ok: false; reason: 'malformed' | 'unknown-key' | 'bad-signature' | 'expired' };

const prefix = 'cb1';

function sign(key: SigningKey, signed: string): string {
  return createHmac('sha256', key.secret).update(signed).digest('base64url');
}

export function mintToken(keys: readonly SigningKey[], claims: TokenClaims): string {
  const key = keys[0];
  if (!key) throw new Error('no callback signing key');
  const payload = Buffer.from(
    JSON.stringify({
      o: claims.orderId,
      s: claims.step,
      r: claims.run,
      a: claims.attempt,
      e: Math.floor(claims.expiresAt.getTime() / 1000),
    }),
  ).toString('base64url');
  const signed = `${prefix}.${key.id}.${payload}`;
  return `${signed}.${sign(key, signed)}`;
}

/** Checks the signature first: nothing in an unsigned payload is read, not even its expiry. */
export function verifyToken(keys: readonly SigningKey[], token: string, now: Date): TokenCheck {
  const parts = token.split('.');
  if (parts.length !== 4 || parts[0] !== prefix || token.length > 1024)
    return { ok: false, reason: 'malformed' };
  const [, keyId, payload, signature] = parts;
  const key = keys.find((k) => k.id === keyId);
  if (!key) return { ok: false, reason: 'unknown-key' };
  const expected = Buffer.from(sign(key, `${prefix}.${keyId}.${payload}`));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return { ok: false, reason: 'bad-signature' };
  }
  let raw: { o?: unknown; s?: unknown; r?: unknown; a?: unknown; e?: unknown };
  try {
    raw = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as typeof raw;
  } catch {
    return { ok: false, reason: 'malformed' };
  }
  const { o, s, r, a, e } = raw;
  if (
    typeof o !== 'string' ||
    typeof s !== 'string' ||
    !Number.isInteger(r) ||
    !Number.isInteger(a) ||
    !Number.isInteger(e)
  ) {
    return { ok: false, reason: 'malformed' };
  }
  const expiresAt = new Date((e as number) * 1000);
  if (now.getTime() > expiresAt.getTime()) return { ok: false, reason: 'expired' };
  return { ok: true, claims: { orderId: o, step: s, run: r as number, attempt: a as number, expiresAt } };
}
