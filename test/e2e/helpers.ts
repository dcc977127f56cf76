import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import type { LedgerSnapshot } from '../../local/remoteServices/index.js';
import type { Stack } from '../../local/stack.js';

/** Ports the OS hands out now; the servers are closed again before returning. */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  const ports: number[] = [];
  for (let i = 0; i < count; i++) {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    ports.push((server.address() as { port: number }).port);
  }
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  return ports;
}

export function ledgersOf(stack: Stack): LedgerSnapshot[] {
  return [stack.remote.inventory.ledger(), stack.remote.payment.ledger(), stack.remote.shipping.ledger()];
}

/**
 * Invariants 3 and 4 as the demo services saw them: at most one effect per idempotency key (and
 * per order), and at most one compensation per action, never one that undid a missing action
 * unless it was recorded as a tombstone.
 */
export function assertNoDoubleEffects(ledgers: LedgerSnapshot[]): void {
  for (const l of ledgers) {
    const keys = l.effects.map((e) => e.idempotencyKey);
    assert.equal(new Set(keys).size, keys.length, `${l.service}: an idempotency key has two effects`);
    const orders = l.effects.map((e) => e.orderId);
    assert.equal(new Set(orders).size, orders.length, `${l.service}: an order has two effects`);
    const undone = l.compensations.map((c) => c.originalIdempotencyKey);
    assert.equal(new Set(undone).size, undone.length, `${l.service}: an action was compensated twice`);
    for (const c of l.compensations) {
      if (!c.tombstone) {
        assert.ok(
          keys.includes(c.originalIdempotencyKey),
          `${l.service}: compensated an action never performed`,
        );
      }
    }
  }
}

/** Effects still standing (performed and not undone) for one order at one service. */
export function standingEffects(ledger: LedgerSnapshot, orderId: string): number {
  const undone = new Set(
    ledger.compensations.filter((c) => !c.tombstone).map((c) => c.originalIdempotencyKey),
  );
  return ledger.effects.filter((e) => e.orderId === orderId && !undone.has(e.idempotencyKey)).length;
}
