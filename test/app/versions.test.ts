import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { handleSchedulerMessage } from '../../shared/scheduler/scheduler.js';
import { runSupervisor } from '../../shared/supervisor/supervisor.js';
import { defineWorkflow, orderWorkflow, workflowVersions } from '../../shared/domain/index.js';
import { queues } from '../../shared/messaging/entities.js';
import {
  context,
  freshDeps,
  held,
  load,
  processOrder,
  reply,
  startInfra,
  submitted,
  type Infra,
  type TestDeps,
} from './direct.js';

/** v2 adds a step: an app deployed with only v2 no longer has the version of orders still on v1. */
const v2Definition = {
  name: 'order',
  version: 2,
  steps: [
    ...orderWorkflow.steps.slice(0, 2),
    { ...orderWorkflow.steps[1], name: 'deposit' },
    orderWorkflow.steps[2],
  ],
};
const v2 = defineWorkflow(v2Definition);

describe('an order whose workflow version the app no longer has', () => {
  let infra: Infra;
  before(async () => {
    infra = await startInfra();
  });
  after(async () => {
    await infra?.stop();
  });
  const deliver = (deps: TestDeps, body: unknown, invocationId?: string) =>
    handleSchedulerMessage(deps, body, context('scheduler', invocationId));
  const alerts = async (orderId: string) => held(infra, queues.operatorAlerts, orderId);

  it("the Supervisor's timeout moves it to Error with an alert naming the version, once", async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    const redeployed: TestDeps = { ...deps, workflows: workflowVersions(v2) };
    deps.clock.advanceSeconds(61);
    const first = await runSupervisor(redeployed, context('supervisor'));
    assert.equal(first.alreadyMoved, 0, JSON.stringify(first));
    const { state } = await load(deps, orderId);
    assert.equal(state.processState, 'Error');
    const sent = await alerts(orderId);
    assert.equal(sent.length, 1);
    assert.match(JSON.stringify(sent[0].body), /order@1/);
    deps.clock.advanceSeconds(61);
    const second = await runSupervisor(redeployed, context('supervisor'));
    assert.equal(second.candidates, 0, 'the sweep does not see it again');
  });

  it("an Agent's reply moves it to Error with an alert instead of being dropped", async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    const redeployed: TestDeps = { ...deps, workflows: workflowVersions(v2) };
    await deliver(redeployed, reply(orderId, 'inventory', 1, 'succeeded'));
    const { state } = await load(deps, orderId);
    assert.equal(state.processState, 'Error');
    assert.equal((await alerts(orderId)).length, 1);
  });
});
