import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { demoStackSettings } from '../../local/demo.js';
import { faultScenarios, timingFromSettings } from '../../local/faultScenarios.js';
import { orderApiClient, sampleOrder, waitForTerminal } from '../../local/orderClient.js';
import { assertNoDoubleEffects, ledgersOf, standingEffects } from './helpers.js';

// The stack as `npm start` runs it (random ports, the demo's short timeouts): one order per kind
// of fault, over HTTP with the function key, each must end where its faults predict.

let stack: Stack;
before(async () => {
  stack = await startStack({ ports: randomPorts, settings: demoStackSettings });
});
after(async () => {
  await stack?.stop();
});

test('an order per kind of fault reaches the terminal state its faults predict', async () => {
  const scenarios = faultScenarios(timingFromSettings(stack.env), true);
  assert.ok(scenarios.length >= 10);
  const client = orderApiClient(stack.baseUrl, stack.functionKey);
  const submitted = await Promise.all(
    scenarios.map((s, i) => client.submit(sampleOrder(`e2e-${i}`, s.skus), `e2e-stack-${s.kind}`)),
  );
  for (const s of submitted) {
    assert.equal(s.status, 202);
    assert.match(s.statusUrl, new RegExp(`/api/orders/${s.orderId}$`));
  }
  const finals = await waitForTerminal(
    client,
    submitted.map((s) => s.orderId),
    { deadline: Date.now() + 120_000, pollMs: 300 },
  );
  const [inventory, payment, shipping] = ledgersOf(stack);
  scenarios.forEach((scenario, i) => {
    const id = submitted[i].orderId;
    const view = finals.get(id);
    assert.equal(view?.processState, scenario.expect, `${scenario.kind}: ${JSON.stringify(view)}`);
    if (scenario.expectTimeouts) assert.ok(view.failureCount > 0, `${scenario.kind} never timed out`);
    const standing = [inventory, payment, shipping].map((l) => standingEffects(l, id));
    if (scenario.expect === 'Processed') assert.deepEqual(standing, [1, 1, 1], scenario.kind);
    if (scenario.expect === 'Compensated') assert.deepEqual(standing, [0, 0, 0], scenario.kind);
    if (scenario.kind === 'compensation-fails') {
      // The refund was refused, so the charge stands and nothing before it was undone.
      assert.deepEqual(standing, [1, 1, 0]);
      assert.equal(view.error?.code, 'CompensationFailed');
    }
    if (scenario.kind === 'exhausted') {
      assert.deepEqual(standing, [0, 0, 0]);
      assert.equal(view.error?.code, 'GaveUp');
    }
  });
  assertNoDoubleEffects([inventory, payment, shipping]);
});

test('the API refuses a request without the function key and a malformed order', async () => {
  const noKey = await fetch(`${stack.baseUrl}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(sampleOrder('no-key')),
  });
  assert.equal(noKey.status, 401);
  const bad = await fetch(`${stack.baseUrl}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-functions-key': stack.functionKey },
    body: JSON.stringify({ customerId: 'c', items: [] }),
  });
  assert.equal(bad.status, 400);
  assert.match(bad.headers.get('content-type') ?? '', /problem\+json/);
});
