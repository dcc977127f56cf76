import {
  decide,
  isTransitionRefused,
  type Command,
  type OrderEvent,
  type OrderState,
  type TransitionRefused,
} from '../domain/index.js';
import { ConcurrencyConflict } from '../stateStore/errors.js';
import type { Dependencies, LoadedOrder } from './ports.js';

export type ApplyResult =
  | { kind: 'applied'; before: LoadedOrder; state: OrderState; commands: Command[] }
  | { kind: 'refused'; refusal: TransitionRefused; current: LoadedOrder }
  | { kind: 'skipped'; current: LoadedOrder; why: string }
  | { kind: 'not-found' };

export class TooManyConflicts extends Error {
  constructor(orderId: string, tries: number) {
    super(`order ${orderId}: still conflicting after ${tries} re-reads`);
    this.name = 'TooManyConflicts';
  }
}

/**
 * Load, decide, write with If-Match. A 412 means someone else moved the order: re-read and
 * decide again from what is now recorded, never overwrite. `precheck` may decline to act on
 * the loaded state (e.g. a Pending order whose back-off has not ended).
 */
export async function applyEvent(
  deps: Dependencies,
  orderId: string,
  event: OrderEvent,
  precheck?: (state: OrderState, now: Date) => string | undefined,
  maxTries = 8,
): Promise<ApplyResult> {
  for (let attempt = 1; attempt <= maxTries; attempt++) {
    const loaded = await deps.store.load(orderId);
    if (!loaded) return { kind: 'not-found' };
    const now = deps.clock.now();
    const why = precheck?.(loaded.state, now);
    if (why !== undefined) return { kind: 'skipped', current: loaded, why };
    let decision;
    try {
      decision = decide(deps.workflow, loaded.state, event, now, deps.policy);
    } catch (e) {
      if (isTransitionRefused(e)) return { kind: 'refused', refusal: e, current: loaded };
      throw e;
    }
    try {
      await deps.store.save(loaded, decision.state);
      return { kind: 'applied', before: loaded, state: decision.state, commands: decision.commands };
    } catch (e) {
      if (e instanceof ConcurrencyConflict) continue;
      throw e;
    }
  }
  throw new TooManyConflicts(orderId, maxTries);
}
