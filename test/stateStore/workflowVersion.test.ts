import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { decide, defineWorkflow, orderWorkflow } from '../../shared/domain/index.js';
import type { StateStore } from '../../shared/stateStore/index.js';
import type { AzuriteInstance } from '../../local/azurite.js';
import { newOrder, policy, submitNew, t0, withStore } from './harness.js';

let azurite: AzuriteInstance;
let store: StateStore;

before(async () => {
  ({ azurite, store } = await withStore());
});
after(async () => {
  await azurite.stop();
});

test('the order and state rows record the workflow name and version as an Int32', async () => {
  const v3 = defineWorkflow({ ...orderWorkflow, version: 3 });
  const orderId = randomUUID();
  const d = decide(v3, null, { type: 'Submit', orderId }, t0, policy);
  await store.submit(newOrder(orderId), d.state);
  for (const rowKey of ['order', 'state']) {
    const raw = await store.orders.getEntity(orderId, rowKey, { disableTypeConversion: true });
    assert.deepEqual(raw.Workflow, { value: 'order', type: 'String' }, rowKey);
    assert.deepEqual(raw.WorkflowVersion, { value: '3', type: 'Int32' }, rowKey);
  }
  const loaded = await store.load(orderId);
  assert.deepEqual([loaded?.state.workflow, loaded?.state.workflowVersion], ['order', 3]);
});

test('a state row written before versions (no WorkflowVersion) reads as version 1', async () => {
  const stored = await submitNew(store);
  const orderId = stored.state.orderId;
  const row = await store.orders.getEntity<Record<string, unknown>>(orderId, 'state');
  const { WorkflowVersion, ...old } = row;
  assert.equal(WorkflowVersion, 1);
  await store.orders.updateEntity({ ...old, partitionKey: orderId, rowKey: 'state' }, 'Replace');
  const raw = await store.orders.getEntity<Record<string, unknown>>(orderId, 'state');
  assert.equal(raw.WorkflowVersion, undefined);
  assert.equal((await store.load(orderId))?.state.workflowVersion, 1);
});
