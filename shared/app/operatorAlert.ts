import type { Command, OrderState } from '../domain/index.js';
import { alertCommand } from '../domain/commandFactory.js';

/**
 * The operator alert of an order that gave up is sent once, with the write that gives up. If the
 * process dies between that write and its sends, nothing in the later transitions (the re-sent
 * undo, the final move into Error) carries the alert again, and the order would end in Error
 * with no alert on the queue. So every later move of such an order carries it too; its MessageId
 * is deterministic (orderId:alert:code), and duplicate detection drops the copies that did go out.
 */
export function withOperatorAlert(commands: readonly Command[], state: OrderState): Command[] {
  const needsAlert =
    state.errorCode !== null && (state.processState === 'Error' || state.processState === 'Compensating');
  if (!needsAlert || commands.some((c) => c.type === 'RaiseOperatorAlert')) return [...commands];
  return [alertCommand(state, state.updatedAt), ...commands];
}
