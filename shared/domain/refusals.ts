/**
 * Which answers of a remote service are a business "no". Only those compensate an order: out of
 * stock, card declined, a tombstone for an action already undone. Every other failure (a revoked
 * credential, a missing permission, an unknown route, an idempotency-key conflict, throttling,
 * 5xx, no answer) says "we cannot talk right now": the step stalls, the Supervisor retries it and
 * an operator is alerted once per outage. An answer nobody declared is therefore never a refusal.
 */
export interface RefusalDeclaration {
  /** Statuses that are a refusal whatever the body says. */
  readonly statuses: readonly number[];
  /** RFC 9457 problem `type`s that are a refusal whatever the status. */
  readonly problemTypes: readonly string[];
}

export type AnswerMeaning = 'refusal' | 'operational';

/** What a non-success answer means under an Agent's declaration (pure; body as parsed JSON). */
export function meaningOf(declaration: RefusalDeclaration, status: number, body: unknown): AnswerMeaning {
  if (declaration.statuses.includes(status)) return 'refusal';
  const type = body && typeof body === 'object' ? (body as { type?: unknown }).type : undefined;
  if (typeof type === 'string' && declaration.problemTypes.includes(type)) return 'refusal';
  return 'operational';
}
