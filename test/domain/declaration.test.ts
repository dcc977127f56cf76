import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decide,
  defineWorkflow,
  makePolicy,
  orderRefusals,
  orderWorkflow,
  type DispatchStep,
  type StepDeclaration,
} from '../../shared/domain/index.js';
import { at, orderId, t0 } from './fixtures.js';

const none = { statuses: [], problemTypes: [] };
const step = (over: Partial<StepDeclaration> = {}): StepDeclaration => ({
  name: 'check',
  agent: 'fraud',
  action: 'screen',
  compensation: null,
  refusals: none,
  ...over,
});

test('a step declares its Agent by name; its queue is derived from it', () => {
  for (const s of orderWorkflow.steps) assert.equal(s.agentQueue, `agent-${s.agent}`);
  assert.equal(orderWorkflow.steps.find((s) => s.name === 'payment')?.agentQueue, 'agent-payment');
  const wf = defineWorkflow({ name: 'w', steps: [step({ name: 'fraud-check', agent: 'fraud-screen' })] });
  assert.equal(wf.steps[0].agentQueue, 'agent-fraud-screen');
});

test('the refusals are part of each step declaration', () => {
  for (const s of orderWorkflow.steps) assert.equal(orderRefusals[s.name], s.refusals);
  assert.deepEqual(orderRefusals.payment.statuses, [422]);
});

test("a step's complete-by is its own, capped by STEP_TIMEOUT_SECONDS, defaulting to it", () => {
  const wf = defineWorkflow({
    name: 'w',
    steps: [
      step({ name: 'quick', agent: 'a', completeBySeconds: 20 }),
      step({ name: 'long', agent: 'b', completeBySeconds: 600 }),
      step({ name: 'plain', agent: 'c', compensation: 'undo' }),
    ],
  });
  const policy = makePolicy({
    stepTimeoutSeconds: 60,
    failureSoftThreshold: 3,
    failureHardThreshold: 5,
    extendedBackoffSeconds: 120,
  });
  let d = decide(wf, null, { type: 'Submit', orderId }, t0, policy);
  d = decide(wf, d.state, { type: 'Claim', by: 'x' }, at(1), policy);
  const dispatched = () => d.commands.find((c): c is DispatchStep => c.type === 'DispatchStep')!;
  assert.deepEqual(dispatched().completeBy, at(1 + 20));
  d = decide(wf, d.state, { type: 'StepSucceeded', step: 'quick', run: 1, attempt: 1 }, at(2), policy);
  assert.deepEqual(dispatched().completeBy, at(2 + 60), 'the setting caps 600 s');
  d = decide(wf, d.state, { type: 'StepSucceeded', step: 'long', run: 1, attempt: 1 }, at(3), policy);
  assert.deepEqual(d.state.steps[2].completeBy, at(3 + 60), 'no declaration: the setting');
});

test('a bad declaration fails at definition, naming the step and the field', () => {
  const bad = (s: Partial<StepDeclaration>) => () => defineWorkflow({ name: 'w', steps: [step(s)] });
  assert.throws(bad({ agent: 'agent_payment' }), /step check: bad agent name "agent_payment"/);
  assert.throws(bad({ agent: 'Payment' }), /bad agent name/);
  assert.throws(bad({ completeBySeconds: 0 }), /completeBySeconds must be a positive integer/);
  assert.throws(bad({ completeBySeconds: 1.5 }), /completeBySeconds/);
  assert.throws(bad({ retry: { maxAttempts: 0 } }), /retry\.maxAttempts must be a positive integer/);
  assert.throws(bad({ refusals: undefined as never }), /declares no refusals/);
  assert.throws(bad({ refusals: { statuses: [500], problemTypes: [] } }), /refusal status 500 is not a 4xx/);
  // One Agent may serve two steps (one queue, one function) only with one configuration.
  assert.doesNotThrow(() => defineWorkflow({ name: 'w', steps: [step({ name: 'a' }), step({ name: 'b' })] }));
  assert.throws(
    () =>
      defineWorkflow({ name: 'w', steps: [step({ name: 'a' }), step({ name: 'b', completeBySeconds: 9 })] }),
    /step b: agent fraud also serves step a with other refusals, retry, completeBySeconds or limits/,
  );
});
