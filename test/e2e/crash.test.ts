import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { orderApiClient, sampleOrder, waitForTerminal } from '../../local/orderClient.js';
import { faultSku } from '../../local/remoteServices/index.js';
import { assertNoDoubleEffects, ledgersOf, standingEffects } from './helpers.js';

// A crashed worker: SIGKILL the functions host while orders are in flight (slow remote calls
// widen the window), start it again, and every order still ends terminal with no remote side
// effect performed twice and no compensation run twice.

let stack: Stack;
before(async () => {
  stack = await startStack({
    ports: randomPorts,
    settings: {
      SUPERVISOR_SCHEDULE: '*/1 * * * * *',
      STEP_TIMEOUT_SECONDS: '4',
      FAILURE_SOFT_THRESHOLD: '3',
      FAILURE_HARD_THRESHOLD: '6',
      EXTENDED_BACKOFF_SECONDS: '1',
    },
  });
});
after(async () => {
  await stack?.stop();
});

test('SIGKILL of the host mid-flight: every order ends terminal, no effect twice', async () => {
  const client = orderApiClient(stack.baseUrl, stack.functionKey);
  const orders: Array<{ skus: string[]; expect: string }> = [
    { skus: [faultSku('payment', 'slow', 1500)], expect: 'Processed' },
    { skus: [faultSku('inventory', 'slow', 1200)], expect: 'Processed' },
    { skus: [faultSku('shipping', 'slow', 1500)], expect: 'Processed' },
    { skus: [faultSku('payment', 'slow', 800), faultSku('shipping', 'slow', 800)], expect: 'Processed' },
    { skus: [], expect: 'Processed' },
    { skus: [], expect: 'Processed' },
    { skus: [faultSku('shipping', 'permanent'), faultSku('payment', 'slow', 1000)], expect: 'Compensated' },
    { skus: [faultSku('payment', 'permanent'), faultSku('inventory', 'slow', 1500)], expect: 'Compensated' },
    { skus: [faultSku('shipping', 'lost-reply', 1)], expect: 'Processed' },
    { skus: [faultSku('inventory', 'transient', 2), faultSku('payment', 'slow', 1200)], expect: 'Processed' },
  ];
  const submitted = await Promise.all(
    orders.map((o, i) => client.submit(sampleOrder(`crash-${i}`, o.skus), `e2e-crash-${i}`)),
  );
  const ids = submitted.map((s) => s.orderId);

  // Wait until work is really in flight: some effects done, some orders not yet terminal.
  const inFlightBy = Date.now() + 20_000;
  for (;;) {
    const effects = ledgersOf(stack).reduce((n, l) => n + l.effects.length, 0);
    if (effects >= 3 || Date.now() > inFlightBy) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const before = await Promise.all(ids.map((id) => client.status(id)));
  const terminalBefore = before.filter((v) => ['Processed', 'Compensated', 'Error'].includes(v.processState));
  assert.ok(
    terminalBefore.length < ids.length,
    'every order finished before the crash; the test proves nothing',
  );

  const crashed = stack.host();
  await stack.killHost('SIGKILL');
  assert.equal(crashed?.child.signalCode, 'SIGKILL');
  await new Promise((r) => setTimeout(r, 500));
  await stack.startHost();

  const finals = await waitForTerminal(client, ids, { deadline: Date.now() + 120_000, pollMs: 300 });
  const ledgers = ledgersOf(stack);
  orders.forEach((o, i) => {
    const view = finals.get(ids[i]);
    assert.equal(view?.processState, o.expect, `order ${i}: ${JSON.stringify(view)}`);
    const standing = ledgers.map((l) => standingEffects(l, ids[i]));
    assert.deepEqual(standing, o.expect === 'Processed' ? [1, 1, 1] : [0, 0, 0], `order ${i}`);
  });
  assertNoDoubleEffects(ledgers);
});
