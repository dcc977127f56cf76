import { sleep } from '../chaos/harness.js';
import { isTerminal } from '../shared/domain/index.js';
import type { StateStore } from '../shared/stateStore/index.js';

/**
 * When each of `ids` reached a terminal state, by the store's own record (the state row's
 * updatedAt, written by the host that finished it), not by when a poll happened to see it.
 *
 * It follows the store's change feed (`StateStore.changes`: reads in proportion to the changes,
 * about one a second), not a load of every open order each round: with 550 orders open that
 * loop kept half a core of the bench and half of Azurite busy, load the measurement added to
 * what it measured on a two-core machine. Orders the feed has not shown terminal are loaded one
 * by one only when it has been quiet for `quietMs`, and at the deadline.
 */
export async function terminalTimes(
  store: StateStore,
  ids: readonly string[],
  since: Date,
  deadlineMs: number,
  quietMs = 5_000,
): Promise<Map<string, number>> {
  const open = new Set(ids);
  const doneAt = new Map<string, number>();
  const finish = (orderId: string, at: Date) => {
    if (!open.delete(orderId)) return;
    doneAt.set(orderId, at.getTime());
  };
  let cursor = new Date(since.getTime() - 1);
  let lastNews = Date.now();
  for (;;) {
    const until = new Date(Date.now() - 100);
    while (cursor < until && open.size > 0) {
      const page = await store.changes(cursor, until, 500);
      for (const c of page.changes) {
        if (!open.has(c.orderId) || !isTerminal(c.processState)) continue;
        finish(c.orderId, c.updatedAt);
        lastNews = Date.now();
      }
      cursor = page.through;
    }
    const late = open.size > 0 && (Date.now() > deadlineMs || Date.now() - lastNews > quietMs);
    if (late) {
      // The feed can miss an order whose index entry was repaired late: read each left once.
      for (const orderId of [...open]) {
        const loaded = await store.load(orderId).catch(() => null);
        if (loaded && isTerminal(loaded.state.processState)) finish(orderId, loaded.state.updatedAt);
      }
      lastNews = Date.now();
    }
    if (open.size === 0 || Date.now() > deadlineMs) return doneAt;
    await sleep(1_000);
  }
}
