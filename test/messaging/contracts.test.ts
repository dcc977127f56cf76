import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  parseMessage,
  schedulerMessageSchema,
  agentRequestSchema,
  maxMessageBytes,
} from '../../shared/messaging/contracts.js';

const orderId = '3f2b8c1e-9a4d-4e5f-8b6a-1c2d3e4f5a6b';

test('a process-order message parses from an object, a string and a Buffer', () => {
  const msg = { type: 'process-order', orderId, reason: 'submitted' };
  for (const body of [msg, JSON.stringify(msg), Buffer.from(JSON.stringify(msg))]) {
    const r = parseMessage(schedulerMessageSchema, body);
    assert.deepEqual(r, { ok: true, value: msg });
  }
});

test('an agent reply parses', () => {
  const reply = {
    type: 'agent-reply',
    orderId,
    run: 1,
    step: 'payment',
    kind: 'do',
    attempt: 2,
    outcome: 'succeeded',
  };
  assert.equal(parseMessage(schedulerMessageSchema, reply).ok, true);
});

test('an invalid body gives a reason and keeps a readable orderId', () => {
  const r = parseMessage(schedulerMessageSchema, { type: 'agent-reply', orderId, step: 'payment' });
  assert.equal(r.ok, false);
  if (!r.ok) {
    assert.equal(r.orderId, orderId);
    assert.match(r.reason, /run|kind|attempt|outcome/);
  }
});

test('non-JSON, unknown types, bad ids and oversized bodies are refused', () => {
  assert.equal(parseMessage(schedulerMessageSchema, 'not json').ok, false);
  assert.equal(parseMessage(schedulerMessageSchema, { type: 'launch-missiles', orderId }).ok, false);
  const badId = parseMessage(schedulerMessageSchema, {
    type: 'process-order',
    orderId: "x' or true",
    reason: 'submitted',
  });
  assert.equal(badId.ok, false);
  if (!badId.ok) assert.equal(badId.orderId, undefined);
  assert.equal(parseMessage(schedulerMessageSchema, 'x'.repeat(maxMessageBytes + 1)).ok, false);
});

test('agent requests need a completeBy with a time zone', () => {
  const req = {
    type: 'agent-request',
    orderId,
    run: 1,
    step: 'inventory',
    kind: 'do',
    action: 'reserve',
    attempt: 1,
    completeBy: '2026-11-22T10:00:00.000Z',
    idempotencyKey: `${orderId}:inventory`,
    payload: {},
  };
  assert.equal(parseMessage(agentRequestSchema, req).ok, true);
  assert.equal(parseMessage(agentRequestSchema, { ...req, completeBy: 'tomorrow' }).ok, false);
});
