import { subscribe } from 'node:diagnostics_channel';

/**
 * When a call's request reaches the socket (issue 26): its headers written, the nearest this side
 * gets to the service's receipt. Node's fetch publishes that on undici's diagnostics channel
 * `undici:client:sendHeaders`, and the request's idempotency key (one per step attempt) names the
 * call. In the staged bench the send took 4 ms to reach the socket at the median but up to 139 ms
 * while a host warmed up (its connections opening), against 10-47 ms at most (7 runs) from the
 * socket to the service's receipt; counted from the send, two such delays put 23 and 24 calls in
 * one of the service's 1 s windows. Without the channel (another fetch) nothing fires and the
 * send's stamp stands.
 */
const channel = 'undici:client:sendHeaders';
const waiting = new Map<string, () => void>();
let listening = false;
const keyLine = /(?:^|\n)idempotency-key:[ \t]*([^\r\n]+)/i;

function onSendHeaders(message: unknown): void {
  if (waiting.size === 0) return;
  const headers = (message as { headers?: unknown }).headers;
  const key = typeof headers === 'string' ? keyLine.exec(headers)?.[1].trim() : undefined;
  const then = key === undefined ? undefined : waiting.get(key);
  if (!then) return;
  waiting.delete(key!);
  then();
}

/**
 * Calls `then` once, when a request carrying `idempotencyKey` has its headers written; returns a
 * function that gives the wait up (call it when the call ends, written or not).
 */
export function whenOnTheWire(idempotencyKey: string, then: () => void): () => void {
  if (!listening) {
    subscribe(channel, onSendHeaders);
    listening = true;
  }
  waiting.set(idempotencyKey, then);
  return () => {
    if (waiting.get(idempotencyKey) === then) waiting.delete(idempotencyKey);
  };
}
