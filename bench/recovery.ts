import { type BenchStack, submitOrder } from './benchStack.js';
import { summarize, type LatencySummary } from './stats.js';

/**
 * Part 4: an Agent that dies mid-call (simulated by a remote call that hangs past complete-by,
 * `FAULT:inventory:hang:1`: the agent stops silently, as a crashed one would) and the time from
 * that instant (when the inventory service received the hung request, from its ledger) to the
 * order's terminal state, beside the configured bound (step timeout + one sweep interval).
 */
export interface RecoveryResult {
  orders: number;
  recovered: number;
  /** Crash (hung request received) to terminal, ms. */
  recovery: LatencySummary;
  /** Submission to terminal, ms. */
  endToEnd: LatencySummary;
  boundMs: number;
  /** Requests the inventory service saw per order (1 hang + retries). */
  inventoryRequests: LatencySummary;
}

export async function measureRecovery(
  bench: BenchStack,
  orders: number,
  concurrency: number,
  boundMs: number,
): Promise<RecoveryResult> {
  const results: Array<{ orderId: string; wall: number; e2e: number; state: string }> = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < orders) {
        next += 1;
        const { orderId, sentAt } = await submitOrder(bench.stack, [
          { sku: 'FAULT:inventory:hang:1', quantity: 1, unitPrice: 5 },
        ]);
        const done = await bench.status.waitFor(orderId, 120_000);
        results.push({ orderId, wall: done.wall, e2e: done.at - sentAt, state: done.state });
      }
    }),
  );
  const ledger = bench.stack.remote.inventory.ledger();
  const recovery: number[] = [];
  const requests: number[] = [];
  for (const r of results) {
    requests.push(ledger.requests.filter((q) => (q.idempotencyKey ?? '').startsWith(r.orderId)).length);
    const hung = ledger.requests.find(
      (q) => q.attempt === 1 && q.status === null && (q.idempotencyKey ?? '').startsWith(r.orderId),
    );
    if (hung && r.state === 'Processed') recovery.push(r.wall - Date.parse(hung.receivedAt));
  }
  return {
    orders,
    recovered: results.filter((r) => r.state === 'Processed').length,
    recovery: summarize(recovery),
    endToEnd: summarize(results.map((r) => r.e2e)),
    boundMs,
    inventoryRequests: summarize(requests),
  };
}
