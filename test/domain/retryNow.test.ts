import { test } from 'node:test';
import assert from 'node:assert/strict';
import { historyEntryFor, historyErrorLimit, TransitionRefused } from '../../shared/domain/index.js';
import { apply, at, fixtures, orderId } from './fixtures.js';

const fx = fixtures();

/** A Pending order in the extended back-off: two timeouts (soft threshold 2, back-off 300 s). */
function backingOff() {
  let s = fx.Pending;
  s = apply(s, { type: 'Claim', by: 'a' }, at(1)).state;
  s = apply(s, { type: 'TimedOut' }, at(100)).state;
  s = apply(s, { type: 'Claim', by: 'b' }, at(101)).state;
  s = apply(s, { type: 'TimedOut' }, at(200)).state;
  assert.equal(s.processState, 'Pending');
  assert.ok(s.scheduledFor!.getTime() > at(201).getTime(), 'in the back-off');
  return s;
}

test('OperatorRetry skips the back-off: due now, claim message now, under a new message id', () => {
  const s = backingOff();
  const { state, commands } = apply(s, { type: 'OperatorRetry', by: 'op' }, at(210));
  assert.equal(state.processState, 'Pending');
  assert.equal(state.scheduledFor!.getTime(), at(210).getTime());
  assert.equal(commands.length, 1);
  const notify = commands[0];
  assert.equal(notify.type, 'NotifyScheduler');
  assert.equal(notify.type === 'NotifyScheduler' && notify.delaySeconds, 0);
  assert.equal(state.failureCount, s.failureCount, 'skipping the wait spends no failure budget');
});

test('OperatorRetry twice: the second is refused (nothing left to skip), so no second claim goes out', () => {
  const once = apply(backingOff(), { type: 'OperatorRetry', by: 'op' }, at(210)).state;
  assert.throws(
    () => apply(once, { type: 'OperatorRetry', by: 'op2' }, at(211)),
    (e: unknown) => e instanceof TransitionRefused && e.code === 'NotAllowedInState',
  );
  assert.throws(
    () => apply(fx.Processing, { type: 'OperatorRetry', by: 'op' }, at(5)),
    (e: unknown) => e instanceof TransitionRefused && e.code === 'NotAllowedInState',
  );
  assert.throws(
    () => apply(backingOff(), { type: 'OperatorRetry', by: ' ' }, at(210)),
    (e: unknown) => e instanceof TransitionRefused && e.code === 'InvalidEvent',
  );
});

test('history entries name the actor, step, attempt, run, outcome and a clipped error', () => {
  const submitted = apply(null, { type: 'Submit', orderId }).state;
  const sub = historyEntryFor({ type: 'Submit', orderId }, null, submitted, at(0));
  assert.deepEqual(
    { actor: sub.actor, event: sub.event, outcome: sub.outcome, run: sub.run },
    { actor: 'submission', event: 'OrderSubmitted', outcome: 'Pending', run: 1 },
  );
  const claimed = apply(submitted, { type: 'Claim', by: 'inv' }, at(1)).state;
  const claim = historyEntryFor({ type: 'Claim', by: 'inv' }, submitted, claimed, at(1));
  assert.equal(claim.actor, 'scheduler');
  assert.equal(claim.by, undefined, 'only an operator is named');
  assert.equal(claim.step, 'inventory');
  assert.equal(claim.attempt, 1);
  const long = 'x'.repeat(10_000);
  const failEvent = {
    type: 'StepFailedPermanently',
    step: 'inventory',
    run: 1,
    attempt: 1,
    error: long,
  } as const;
  const failed = apply(claimed, failEvent, at(2)).state;
  const fail = historyEntryFor(failEvent, claimed, failed, at(2), 3);
  assert.equal(fail.actor, 'agent');
  assert.equal(fail.event, 'StepFailed');
  assert.equal(fail.workflowVersion, 3);
  assert.ok(fail.error!.length <= historyErrorLimit);
  const timedOut = apply(claimed, { type: 'TimedOut' }, at(100)).state;
  const to = historyEntryFor({ type: 'TimedOut' }, claimed, timedOut, at(100));
  assert.equal(to.actor, 'supervisor');
  assert.match(to.error ?? '', /complete-by/);
  const cancelled = apply(claimed, { type: 'OperatorCancel', by: 'alice', reason: 'asked' }, at(3)).state;
  const cancel = historyEntryFor(
    { type: 'OperatorCancel', by: 'alice', reason: 'asked' },
    claimed,
    cancelled,
    at(3),
  );
  assert.deepEqual([cancel.actor, cancel.by, cancel.outcome], ['operator', 'alice', 'Compensating']);
});
