import type { Command, StatusEventName } from './commands.js';

/**
 * How much of an order's life the order-status topic tells. Every event is one more Service Bus
 * send (and a receive and settlement per listening subscription), so step-level events are
 * opt-in: a deployment pays one send per step only when a client follows orders step by step.
 * `none` sends no events at all: no guarantee rests on them (clients can poll the status URL), and
 * on Service Bus Standard they are 4 of a success order's 18 credits.
 */
export const statusEventLevels = ['none', 'process', 'step'] as const;
export type StatusEventLevel = (typeof statusEventLevels)[number];
export const defaultStatusEventLevel: StatusEventLevel = 'process';

/** Events about one step. The rest (received, compensating, processed, ...) mark process states. */
const stepLevelEvents: ReadonlySet<StatusEventName> = new Set(['step-completed', 'failed']);

export function isPublished(event: StatusEventName, level: StatusEventLevel): boolean {
  if (level === 'none') return false;
  return level === 'step' || !stepLevelEvents.has(event);
}

/** The commands to carry out at this level: status events above it are dropped, nothing else. */
export function publishedAt(commands: readonly Command[], level: StatusEventLevel): Command[] {
  return commands.filter((c) => c.type !== 'PublishStatus' || isPublished(c.event, level));
}
