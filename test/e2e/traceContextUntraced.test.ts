import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { faultSku } from '../../local/remoteServices/index.js';
import { sampleOrder, waitForTerminal, orderApiClient } from '../../local/orderClient.js';

/**
 * Propagating trace context is not exporting it: with no Application Insights and no telemetry
 * file, a client's `traceparent` still reaches every remote call made for its order, through the
 * Scheduler's messages, the Agents and compensation. The real stack, nothing recording spans.
 */
let stack: Stack;

before(async () => {
  for (const name of ['APPLICATIONINSIGHTS_CONNECTION_STRING', 'TELEMETRY_FILE'])
    assert.equal(process.env[name], undefined, `${name} must not be set for this test`);
  stack = await startStack({ ports: randomPorts, settings: { STEP_TIMEOUT_SECONDS: '8' } });
});
after(async () => {
  await stack?.stop();
});

async function submitTraced(skus: string[], traceId: string): Promise<string> {
  const res = await fetch(`${stack.baseUrl}/orders`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-functions-key': stack.functionKey,
      traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`,
    },
    body: JSON.stringify(sampleOrder(`untraced-${traceId.slice(0, 8)}`, skus)),
  });
  const text = await res.text();
  assert.equal(res.status, 202, text);
  return (JSON.parse(text) as { orderId: string }).orderId;
}

test("without telemetry, every remote call of an order carries the client's trace id", async () => {
  const cleanTrace = randomBytes(16).toString('hex');
  const refusedTrace = randomBytes(16).toString('hex');
  const clean = await submitTraced(['SKU-1'], cleanTrace);
  const refused = await submitTraced(['SKU-1', faultSku('payment', 'permanent')], refusedTrace);
  const client = orderApiClient(stack.baseUrl, stack.functionKey);
  const ends = await waitForTerminal(client, [clean, refused], { deadline: Date.now() + 60_000 });
  assert.equal(ends.get(clean)?.processState, 'Processed');
  assert.equal(ends.get(refused)?.processState, 'Compensated');

  const calls = [
    ...stack.remote.inventory.traceParents(),
    ...stack.remote.payment.traceParents(),
    ...stack.remote.shipping.traceParents(),
  ];
  for (const [orderId, traceId, atLeast] of [
    [clean, cleanTrace, 3],
    [refused, refusedTrace, 3], // reserve, charge (refused), release
  ] as const) {
    const mine = calls.filter((c) => c.idempotencyKey.startsWith(orderId));
    assert.ok(mine.length >= atLeast, `${orderId}: ${mine.length} calls`);
    for (const c of mine)
      assert.equal(
        c.traceParent?.split('-')[1],
        traceId,
        `${c.operation} of ${orderId} carried ${String(c.traceParent)}`,
      );
  }
});
