import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { demoStackSettings } from '../../local/demo.js';
import { faultScenarios, timingFromSettings } from '../../local/faultScenarios.js';
import { orderApiClient, sampleOrder, waitForTerminal } from '../../local/orderClient.js';
import { assertNoDoubleEffects, ledgersOf, standingEffects } from './helpers.js';
import { faultSku } from '../../local/remoteServices/index.js';
import { orderWorkflow } from '../../shared/domain/index.js';

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

test('an order goes through every declared step in order, each Agent registered and its service called from the declaration', async () => {
  const client = orderApiClient(stack.baseUrl, stack.functionKey);
  const last = orderWorkflow.steps.at(-1)!;
  const [ok, refused] = await Promise.all([
    client.submit(sampleOrder('declared-steps'), 'e2e-declared-ok'),
    client.submit(sampleOrder('declared-steps', [faultSku(last.agent, 'permanent')]), 'e2e-declared-refused'),
  ]);
  const finals = await waitForTerminal(client, [ok.orderId, refused.orderId], {
    deadline: Date.now() + 120_000,
    pollMs: 300,
  });
  const view = finals.get(ok.orderId)!;
  assert.equal(view.processState, 'Processed', JSON.stringify(view));
  assert.deepEqual(
    view.steps.map((st) => [st.name, st.status]),
    orderWorkflow.steps.map((st) => [st.name, 'Completed']),
  );
  for (const step of orderWorkflow.steps) {
    const ledger = stack.remote[step.agent].ledger();
    const effects = ledger.effects.filter((e) => e.orderId === ok.orderId);
    assert.deepEqual(
      effects.map((e) => e.operation),
      [step.action],
      `${step.name}: the ${step.agent} service performed ${step.action} once`,
    );
  }
  // In declared order: each effect after the one of the step before it.
  const times = orderWorkflow.steps.map(
    (st) => stack.remote[st.agent].ledger().effects.find((e) => e.orderId === ok.orderId)!.performedAt,
  );
  assert.deepEqual([...times].sort(), times, 'effects in step order');

  // The last step's refusal (its declared refusals) compensates every earlier step, in reverse.
  const undone = finals.get(refused.orderId)!;
  assert.equal(undone.processState, 'Compensated', JSON.stringify(undone));
  for (const step of orderWorkflow.steps) {
    const ledger = stack.remote[step.agent].ledger();
    // A step declared without a compensation (a check that changes nothing) has nothing to undo.
    const expected = step === last || step.compensation !== null ? 0 : 1;
    assert.equal(standingEffects(ledger, refused.orderId), expected, `${step.name}: ${expected} standing`);
  }
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
