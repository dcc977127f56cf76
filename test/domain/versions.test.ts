import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decide,
  defineWorkflow,
  orderWorkflow,
  type DispatchStep,
  type OrderState,
  type Workflow,
} from '../../shared/domain/index.js';
import { at, orderId, policy, t0 } from './fixtures.js';

/** Version 2 of the order workflow: payment before inventory, and a new step before shipping. */
const v2Definition = {
  name: 'order',
  version: 2,
  steps: [
    orderWorkflow.steps[1],
    orderWorkflow.steps[0],
    { ...orderWorkflow.steps[1], name: 'deposit' },
    orderWorkflow.steps[2],
  ],
};
const v2: Workflow = defineWorkflow(v2Definition);

/** Same step count, two steps swapped: today's guard (name + step count) lets it through. */
const swappedDefinition = {
  name: 'order',
  version: 2,
  steps: [orderWorkflow.steps[1], orderWorkflow.steps[0], orderWorkflow.steps[2]],
};
const swapped: Workflow = defineWorkflow(swappedDefinition);

function submittedOnV1(): OrderState {
  return decide(orderWorkflow, null, { type: 'Submit', orderId }, t0, policy).state;
}

test('an order stored under v1 is never mis-mapped by an app whose only workflow reorders the steps', () => {
  const pending = submittedOnV1();
  const d = decide(swapped, pending, { type: 'Claim', by: 'inv-1' }, at(1), policy);
  const dispatch = d.commands.find((c): c is DispatchStep => c.type === 'DispatchStep');
  const running = d.state.steps.find((s) => s.status === 'Running');
  if (dispatch && running) {
    // If it does dispatch, the command must name the step the state marks Running.
    assert.equal(dispatch.step, running.name, 'dispatched one step while another is marked Running');
  }
  // The app does not hold v1: the order must end in Error with an alert naming the version.
  assert.equal(d.state.processState, 'Error');
  const alert = d.commands.find((c) => c.type === 'RaiseOperatorAlert');
  assert.ok(alert && alert.reason.includes('order@1'), JSON.stringify(alert));
});

test('an order stored under v1 times out in an app that only has v2 (a step added): Error with an alert naming v1', () => {
  const processing = decide(
    orderWorkflow,
    submittedOnV1(),
    { type: 'Claim', by: 'inv-1' },
    at(1),
    policy,
  ).state;
  const d = decide(v2, processing, { type: 'TimedOut' }, at(1000), policy);
  assert.equal(d.state.processState, 'Error');
  assert.equal(d.state.errorCode, 'WorkflowRetired');
  const alert = d.commands.find((c) => c.type === 'RaiseOperatorAlert');
  assert.ok(alert && alert.reason.includes('order@1'), JSON.stringify(alert));
});
