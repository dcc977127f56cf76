import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  awaitsNotStarted,
  canStart,
  dispatchMessageId,
  notStartedReplyId,
  orderWorkflow,
  outstandingRequest,
  reportsNotStarted,
  requestTimeToLiveMs,
  startMarginFor,
  startMarginMs,
  unreadRequestGraceMs,
  type QueueView,
} from '../../shared/domain/index.js';
import { apply, at, fixtures, orderId } from './fixtures.js';

const fx = fixtures();
const view = (ids: string[], complete = true, moving = true): QueueView => ({
  waiting: new Set(ids),
  complete,
  moving,
});

test('an Agent starts only with more than the margin left, and reports not started only on a first delivery', () => {
  fc.assert(
    fc.property(fc.integer({ min: -60_000, max: 60_000 }), fc.integer({ min: 1, max: 10 }), (left, count) => {
      const now = at(0);
      const completeBy = new Date(now.getTime() + left);
      assert.equal(canStart(now, completeBy), left > startMarginMs);
      assert.equal(reportsNotStarted(now, completeBy, count), left <= startMarginMs && count === 1);
    }),
  );
  assert.equal(reportsNotStarted(at(10), at(5), undefined), true);
});

test('a request outlives its complete-by by the unread grace, so an Agent still reads it', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 600_000 }), (window) => {
      const ttl = requestTimeToLiveMs(at(0), new Date(at(0).getTime() + window));
      assert.equal(ttl, window + unreadRequestGraceMs);
      assert.ok(ttl > window);
    }),
  );
});

test('the outstanding request names the running step or the undo, with the dispatched id', () => {
  const processing = fx.Processing;
  const request = outstandingRequest(orderWorkflow, processing);
  assert.deepEqual(request, {
    agentQueue: orderWorkflow.steps[0].agentQueue,
    messageId: dispatchMessageId(orderId, 'inventory', 1, 'do', 1),
  });
  const undo = outstandingRequest(orderWorkflow, fx.Compensating);
  assert.equal(undo!.messageId, dispatchMessageId(orderId, 'inventory', 1, 'compensate', 1));
  assert.equal(outstandingRequest(orderWorkflow, fx.Pending), undefined);
  const next = apply(
    processing,
    { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 },
    at(2),
  ).state;
  assert.equal(
    outstandingRequest(orderWorkflow, next)!.messageId,
    dispatchMessageId(orderId, 'payment', 1, 'do', 1),
  );
});

test('a timeout waits only while its request is unread or its not-started reply queued, on a consumed queue', () => {
  const id = 'o:inventory:1:do';
  fc.assert(
    fc.property(
      fc.boolean(),
      fc.boolean(),
      fc.boolean(),
      fc.boolean(),
      fc.boolean(),
      fc.boolean(),
      (inAgent, agentComplete, agentMoving, replyQueued, schedComplete, schedMoving) => {
        const agent = view(inAgent ? [id, 'other'] : ['other'], agentComplete, agentMoving);
        const scheduler = view(replyQueued ? [notStartedReplyId(id)] : [], schedComplete, schedMoving);
        const expected =
          (agentMoving && (inAgent || !agentComplete)) || (schedMoving && (replyQueued || !schedComplete));
        assert.equal(awaitsNotStarted(id, agent, scheduler), expected);
      },
    ),
  );
  // Nothing known: a timeout.
  assert.equal(awaitsNotStarted(id, undefined, undefined), false);
  // A dead Agent (its head never moves) ends orders: the unread request does not hold them.
  assert.equal(awaitsNotStarted(id, view([id], true, false), view([], true, true)), false);
  // Another attempt's reply does not hold this one.
  assert.equal(awaitsNotStarted(id, view([]), view([notStartedReplyId('o:inventory:2:do')])), false);
});

test('the start margin follows how long recent calls took, within [0.5 s, half the window]', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 20_000 }), { maxLength: 60 }),
      fc.integer({ min: 0, max: 60_000 }),
      (recent, window) => {
        const margin = startMarginFor(recent, window);
        assert.ok(margin >= startMarginMs);
        assert.ok(margin <= Math.max(startMarginMs, window / 2));
        // A request read the instant it was sent always starts when its window allows any start.
        if (window / 2 > startMarginMs)
          assert.equal(canStart(at(0), new Date(at(0).getTime() + window), margin), true);
      },
    ),
  );
  // A busy Agent whose calls take 1.2 s does not start with 1 s left of a 3 s window.
  const busy = Array.from({ length: 20 }, () => 1200);
  assert.equal(startMarginFor(busy, 3000), 1200);
  assert.equal(
    reportsNotStarted(at(0), new Date(at(0).getTime() + 1000), 1, startMarginFor(busy, 3000)),
    true,
  );
  assert.equal(startMarginFor([], undefined), startMarginMs);
});
