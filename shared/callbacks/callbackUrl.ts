import { callbackBase, waitingSettings } from '../config/waitingSettings.js';
import type { AgentRequestMessage } from '../messaging/contracts.js';
import { mintToken } from './token.js';

/** The route a service POSTs its outcome to (and `/heartbeat` under it); see callbackApi.ts. */
export const callbackRoute = 'callbacks/{token}';

/**
 * The URL the Agent hands the service for one attempt of a callback step: the token names the
 * order, step, run and attempt and expires at the attempt's longest reach plus the grace.
 */
export function callbackUrlFor(request: AgentRequestMessage & { callbackUntil: string }): string {
  const s = waitingSettings();
  const expiresAt = new Date(new Date(request.callbackUntil).getTime() + s.graceSeconds * 1000);
  const token = mintToken(s.signingKeys, {
    orderId: request.orderId,
    step: request.step,
    run: request.run,
    attempt: request.attempt,
    expiresAt,
  });
  return `${callbackBase(s)}/api/callbacks/${token}`;
}

/** The service's reference for accepted work, from its 202 body (`reference`, else an id it names). */
export function referenceOf(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const b = body as Record<string, unknown>;
  const ref = b.reference ?? b.id;
  return typeof ref === 'string' && ref.length > 0 ? ref.slice(0, 200) : undefined;
}
