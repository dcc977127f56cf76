import type { HttpRequest, HttpResponseInit } from '@azure/functions';
import { problem, problemTypes } from './problem.js';

/** Largest request body the API accepts. */
export const maxBodyBytes = 64 * 1024;
/** Deepest JSON nesting accepted; our documents need 3, attackers send thousands. */
export const maxJsonDepth = 16;

export type JsonBodyResult =
  { ok: true; value: unknown; raw: string } | { ok: false; response: HttpResponseInit };

function isJsonContentType(value: string | null): boolean {
  if (!value) return false;
  const mediaType = value.split(';')[0]!.trim().toLowerCase();
  return mediaType === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(mediaType);
}

/** Depth of brackets outside strings, stopping early once over the limit. */
export function jsonDepthExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/**
 * Reads a JSON request body with the limits every route shares: 415 unless JSON, 413 over
 * maxBodyBytes (checked on Content-Length before reading, and on the bytes read), 400 for
 * malformed or too deeply nested JSON.
 */
export async function readJsonBody(request: HttpRequest, limit = maxBodyBytes): Promise<JsonBodyResult> {
  const contentType = request.headers.get('content-type');
  if (!isJsonContentType(contentType)) {
    return {
      ok: false,
      response: problem(
        415,
        problemTypes.unsupportedMediaType,
        'Unsupported media type',
        `Send the body as application/json (got ${contentType ? JSON.stringify(contentType.slice(0, 100)) : 'no Content-Type'}).`,
      ),
    };
  }
  const tooLarge = (): JsonBodyResult => ({
    ok: false,
    response: problem(
      413,
      problemTypes.tooLarge,
      'Payload too large',
      `The body must be at most ${limit} bytes.`,
      {
        maxBytes: limit,
      },
    ),
  });
  const declared = Number(request.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > limit) return tooLarge();

  const bytes = await readAtMost(request, limit);
  if (bytes === undefined) return tooLarge();
  let raw: string;
  try {
    raw = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return malformed('The body is not valid UTF-8.');
  }
  if (raw.trim() === '') return malformed('The body is empty; send a JSON object.');
  if (jsonDepthExceeds(raw, maxJsonDepth))
    return malformed(`The JSON is nested deeper than ${maxJsonDepth} levels.`);
  try {
    return { ok: true, value: JSON.parse(raw), raw };
  } catch (e) {
    return malformed(`The body is not valid JSON: ${(e as Error).message}`);
  }
}

function malformed(detail: string): JsonBodyResult {
  return { ok: false, response: problem(400, problemTypes.malformedJson, 'Malformed JSON', detail) };
}

/** Reads the body stream, giving up (undefined) as soon as it passes the limit. */
async function readAtMost(request: HttpRequest, limit: number): Promise<Uint8Array | undefined> {
  if (!request.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
