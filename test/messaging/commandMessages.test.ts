import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decide,
  makePolicy,
  orderWorkflow,
  unreadRequestGraceMs,
  type Order,
  type DispatchStep,
} from '../../shared/domain/index.js';
import { toMessage, poisonAlert } from '../../shared/messaging/commandMessages.js';
import { agentRequestSchema, parseMessage, processOrderSchema } from '../../shared/messaging/contracts.js';

const orderId = '3f2b8c1e-9a4d-4e5f-8b6a-1c2d3e4f5a6b';
const now = new Date('2030-01-01T00:00:00.000Z');
const policy = makePolicy({
  stepTimeoutSeconds: 30,
  failureSoftThreshold: 1,
  failureHardThreshold: 3,
  extendedBackoffSeconds: 120,
});
const order: Order = {
  orderId,
  customerId: 'c-1',
  items: [{ sku: 'A', quantity: 1, unitPrice: 2 }],
  shippingAddress: { name: 'A', line1: 'B', city: 'C', postalCode: '1', country: 'DE' },
  createdAt: now,
};

function claimed() {
  const submitted = decide(orderWorkflow, null, { type: 'Submit', orderId }, now, policy);
  return decide(orderWorkflow, submitted.state, { type: 'Claim', by: 'inv-1' }, now, policy);
}

test('a dispatch becomes a valid agent request whose TTL ends the unread grace after complete-by', () => {
  const dispatch = claimed().commands.find((c): c is DispatchStep => c.type === 'DispatchStep')!;
  const { entity, message } = toMessage(dispatch, order, now);
  assert.equal(entity, 'agent-inventory');
  assert.equal(message.messageId, dispatch.messageId);
  assert.equal(message.timeToLiveMs, 30_000 + unreadRequestGraceMs);
  assert.equal(message.scheduledEnqueueTime, undefined);
  const parsed = parseMessage(agentRequestSchema, message.body);
  assert.ok(parsed.ok);
  if (parsed.ok) {
    assert.equal(parsed.value.idempotencyKey, `${orderId}:inventory`);
    assert.equal(parsed.value.payload.customerId, 'c-1');
    assert.equal(parsed.value.payload.originalIdempotencyKey, undefined);
  }
});

test('a compensation names the key of the action it undoes', () => {
  const { state } = claimed();
  const cancelled = decide(orderWorkflow, state, { type: 'OperatorCancel', by: 'op' }, now, policy);
  const undo = cancelled.commands.find((c): c is DispatchStep => c.type === 'DispatchStep')!;
  assert.equal(undo.kind, 'compensate');
  const { message } = toMessage(undo, order, now);
  const parsed = parseMessage(agentRequestSchema, message.body);
  assert.ok(parsed.ok);
  if (parsed.ok) assert.equal(parsed.value.payload.originalIdempotencyKey, `${orderId}:inventory`);
});

test('a back-off retry is a scheduled process-order message', () => {
  const { state } = claimed();
  const later = new Date(now.getTime() + 31_000);
  const timedOut = decide(orderWorkflow, state, { type: 'TimedOut' }, later, policy);
  const notify = timedOut.commands.find((c) => c.type === 'NotifyScheduler')!;
  const { entity, message } = toMessage(notify, order, later);
  assert.equal(entity, 'scheduler');
  assert.equal(message.scheduledEnqueueTime?.getTime(), later.getTime() + 120_000);
  assert.ok(parseMessage(processOrderSchema, message.body).ok);
});

test('status events and alerts go to their own entities with the order id', () => {
  const { commands } = decide(orderWorkflow, null, { type: 'Submit', orderId }, now, policy);
  const status = commands.find((c) => c.type === 'PublishStatus')!;
  const { entity, message } = toMessage(status, order, now);
  assert.equal(entity, 'order-status');
  assert.equal(message.applicationProperties?.orderId, orderId);
  const alert = poisonAlert('scheduler', 'm-1', 'body is not JSON', undefined, now);
  assert.equal(alert.entity, 'operator-alerts');
  assert.equal(alert.message.messageId, 'poison:scheduler:m-1');
  assert.match(JSON.stringify(alert.message.body), /PoisonMessage on scheduler/);
});
