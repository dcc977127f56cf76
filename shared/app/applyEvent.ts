import {
  decide,
  historyEntryFor,
  isTransitionRefused,
  type Command,
  type OrderEvent,
  type OrderState,
  type TransitionRefused,
} from '../domain/index.js';
import { OrderNotFound, type StoredOrder } from '../stateStore/index.js';
import type { Dependencies } from './ports.js';
import { recordTransition } from '../observability/orderMetrics.js';
import { recordWaiting } from '../observability/waitingMetrics.js';
import { activeTraceId, traceIdOf } from '../observability/tracing.js';

export type ApplyResult =
  | { kind: 'applied'; before: StoredOrder; state: OrderState; commands: Command[] }
  | { kind: 'refused'; refusal: TransitionRefused; current: StoredOrder }
  | { kind: 'skipped'; current: StoredOrder; why: string }
  | { kind: 'not-found' };

class Skip extends Error {}

export interface ApplyOptions {
  /**
   * The history entry names the order's own trace (from its submission) instead of the active
   * one: for events that arrive by a request with a trace of its own (a callback, an operator's
   * approval), whose transition still belongs to the order's trace.
   */
  historyInOrderTrace?: boolean;
}

function orderTraceId(stored: StoredOrder): { traceId?: string } {
  const traceId = traceIdOf(stored.traceParent ?? undefined);
  return traceId ? { traceId } : activeTraceId();
}

/**
 * One event against one order: the store loads, the domain decides, the store writes with
 * If-Match, and a 412 means re-read and decide again (StateStore.applyWithRetry). The outcome is
 * a value, not an exception, because a refused or skipped event is normal life for the Scheduler.
 * `precheck` may decline to act on the loaded order (e.g. a back-off that has not ended); it runs
 * again on every re-read, so what it saw is what the ETag-guarded write replaces.
 */
export async function applyEvent(
  deps: Dependencies,
  orderId: string,
  event: OrderEvent,
  precheck?: (state: OrderState, now: Date, stored: StoredOrder) => string | undefined,
  options: ApplyOptions = {},
): Promise<ApplyResult> {
  let seen: StoredOrder | undefined;
  try {
    const { decision } = await deps.store.applyWithRetry(
      orderId,
      (current) => {
        seen = current;
        const now = deps.clock.now();
        const why = precheck?.(current.state, now, current);
        if (why !== undefined) throw new Skip(why);
        return decide(deps.workflows, current.state, event, now, deps.policy);
      },
      (current, decision) =>
        // The entry rides in the transition's own transaction: no entry without the transition.
        ({
          ...historyEntryFor(
            event,
            current.state,
            decision.state,
            decision.state.updatedAt,
            current.state.workflowVersion,
          ),
          ...(options.historyInOrderTrace ? orderTraceId(current) : activeTraceId()),
        }),
    );
    recordTransition(seen!.state, event, decision.state, decision.commands);
    recordWaiting(seen!.state, decision.state);
    return { kind: 'applied', before: seen!, state: decision.state, commands: decision.commands };
  } catch (e) {
    if (e instanceof OrderNotFound) return { kind: 'not-found' };
    if (e instanceof Skip) return { kind: 'skipped', current: seen!, why: e.message };
    if (isTransitionRefused(e)) return { kind: 'refused', refusal: e, current: seen! };
    throw e;
  }
}
