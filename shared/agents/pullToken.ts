import type { OutgoingMessage } from '../messaging/bus.js';

/**
 * A pull token (issue 26): a small message in an Agent's own queue saying "a request waits in the
 * service's waiting queue, due now". Whichever instance reads it pulls that request if it has a
 * free call slot; a request never waits for a slot that is free but has no invocation to fill it.
 * It carries no order: losing one costs at most a later start, never a request.
 */
export interface PullToken {
  type: 'pull-token';
  /** How many instances without a slot passed it on already. */
  hops: number;
  /** The id its first send had (its passes on are named after it). */
  id: string;
  /**
   * The instance it wakes: one granted a slot while none of its loops ran (no request may reach
   * it otherwise). Elsewhere, where no slot is free, it is passed on at once, not dropped.
   */
  for?: string;
}

/**
 * How many times a token is passed on before it is dropped: a guard against tokens circling for
 * ever; the lease row's count of waiting requests ends them sooner (nothing waits: dropped).
 */
export const maxTokenHops = 20;

export function isPullToken(body: unknown): body is PullToken {
  if (typeof body !== 'object' || body === null) return false;
  const b = body as Record<string, unknown>;
  return (
    b.type === 'pull-token' &&
    typeof b.hops === 'number' &&
    typeof b.id === 'string' &&
    (b.for === undefined || typeof b.for === 'string')
  );
}

/** The token's message, due at `at` (epoch ms); its id absorbs duplicates of the send. */
export function pullTokenMessage(
  id: string,
  at: number,
  now: number,
  hops: number,
  forInstance?: string,
): OutgoingMessage & { body: PullToken } {
  const body: PullToken = {
    type: 'pull-token',
    hops,
    id,
    ...(forInstance !== undefined ? { for: forInstance } : {}),
  };
  return {
    messageId: hops === 0 ? id : `${id}:hop:${hops}`,
    body,
    subject: 'pull-token',
    // A token nobody read within a minute is stale: the requests it stood for were pulled or
    // have their own tokens.
    timeToLiveMs: Math.max(0, at - now) + 60_000,
    ...(at > now ? { scheduledEnqueueTime: new Date(at) } : {}),
  };
}
