import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  isTransitionRefused,
  meaningOf,
  orderRefusals,
  outstandingCommands,
  orderWorkflow,
  type NotifyScheduler,
  type OrderState,
} from '../../shared/domain/index.js';
import { apply, at, fixtures, policy } from './fixtures.js';

const fx = fixtures();

/** Stalls attempt `attempt` of inventory's action at `t`, then lets its complete-by pass. */
function stallAndTimeOut(s: OrderState, t: number): OrderState {
  const step = s.steps[0];
  s = apply(
    s,
    {
      type: 'StepStalled',
      step: 'inventory',
      run: 1,
      attempt: step.attempt,
      kind: 'do',
      detail: '401 Unauthorized',
    },
    at(t),
  ).state;
  return apply(s, { type: 'TimedOut' }, at(t + 100)).state;
}

test('the demo services declare 422 and the tombstone 409 as refusals; everything else is operational', () => {
  const d = orderRefusals.payment;
  assert.equal(meaningOf(d, 422, { type: 'urn:order-processing:problem:injected-permanent' }), 'refusal');
  assert.equal(meaningOf(d, 409, { type: 'urn:order-processing:problem:tombstoned' }), 'refusal');
  assert.equal(meaningOf(d, 409, { type: 'urn:order-processing:problem:key-conflict' }), 'operational');
  for (const status of [400, 401, 403, 404, 405, 409, 413, 429, 500, 503]) {
    assert.equal(meaningOf(d, status, undefined), 'operational', `${status}`);
  }
  assert.equal(meaningOf({ statuses: [], problemTypes: [] }, 422, undefined), 'operational');
});

test('a stall is recorded on the running step; the step stays in flight', () => {
  const d = apply(
    fx.Processing,
    { type: 'StepStalled', step: 'inventory', run: 1, attempt: 1, kind: 'do', detail: '401 key revoked' },
    at(2),
  );
  assert.equal(d.state.processState, 'Processing');
  assert.equal(d.state.steps[0].status, 'Running');
  assert.equal(d.state.steps[0].stalledAttempt, 1);
  assert.match(d.state.steps[0].lastError ?? '', /401 key revoked/);
  assert.deepEqual(d.commands, []);
  assert.equal(d.state.completeBy?.getTime(), fx.Processing.completeBy?.getTime(), 'complete-by unchanged');
});

test('a stall for another attempt or a finished step is stale', () => {
  assert.throws(
    () =>
      apply(
        fx.Processing,
        { type: 'StepStalled', step: 'inventory', run: 1, attempt: 2, kind: 'do', detail: 'x' },
        at(2),
      ),
    (e) => isTransitionRefused(e, 'StaleAttempt'),
  );
  assert.throws(
    () =>
      apply(
        fx.Processed,
        { type: 'StepStalled', step: 'shipping', run: 1, attempt: 1, kind: 'do', detail: 'x' },
        at(9),
      ),
    (e) => isTransitionRefused(e, 'StaleAttempt'),
  );
});

test('stalled attempts that time out never spend the failure budget, however many', () => {
  let s = fx.Processing;
  const ids = new Set<string>();
  for (let i = 0; i < policy.failureHardThreshold * 3; i++) {
    const d = apply(
      s,
      {
        type: 'StepStalled',
        step: 'inventory',
        run: 1,
        attempt: s.steps[0].attempt,
        kind: 'do',
        detail: '503',
      },
      at(10 + i * 1000),
    );
    const t = apply(d.state, { type: 'TimedOut' }, at(10 + i * 1000 + 100));
    s = t.state;
    assert.equal(s.processState, 'Pending');
    assert.equal(s.failureCount, 0);
    assert.equal(s.steps[0].stalls, i + 1);
    const notify = t.commands.find((c): c is NotifyScheduler => c.type === 'NotifyScheduler');
    assert.ok(notify);
    // Back-off from the soft threshold on, like counted retries.
    assert.equal(
      notify.delaySeconds,
      i + 1 >= policy.failureSoftThreshold ? policy.extendedBackoffSeconds : 0,
    );
    assert.ok(!ids.has(notify.messageId), `retry message id ${notify.messageId} is new`);
    ids.add(notify.messageId);
    // Healing re-creates the same message.
    assert.deepEqual(outstandingCommands(orderWorkflow, s, at(10 + i * 1000 + 100)), [notify]);
    s = apply(s, { type: 'Claim', by: `c${i}` }, new Date(s.scheduledFor!.getTime())).state;
  }
  assert.equal(s.processState, 'Processing');
  assert.equal(s.steps[0].attempt, policy.failureHardThreshold * 3 + 1);
});

test('a silent timeout still counts, and its retry id never repeats a stalled retry id', () => {
  let s = stallAndTimeOut(fx.Processing, 2);
  const stalledRetry = outstandingCommands(orderWorkflow, s, at(102))[0] as NotifyScheduler;
  s = apply(s, { type: 'Claim', by: 'c' }, at(103)).state;
  const t = apply(s, { type: 'TimedOut' }, at(300));
  assert.equal(t.state.failureCount, 1);
  const counted = t.commands.find((c): c is NotifyScheduler => c.type === 'NotifyScheduler');
  assert.notEqual(counted?.messageId, stalledRetry.messageId);
});

test('a stalled undo is retried without counting towards giving up', () => {
  let s = apply(fx.Processing, { type: 'OperatorCancel', by: 'op' }, at(2)).state;
  for (let i = 0; i < policy.failureHardThreshold * 2; i++) {
    const attempt = s.steps[0].compensationAttempt;
    s = apply(
      s,
      { type: 'StepStalled', step: 'inventory', run: 1, attempt, kind: 'compensate', detail: '401' },
      at(10 + i * 1000),
    ).state;
    s = apply(s, { type: 'TimedOut' }, new Date(s.completeBy!.getTime() + 1000)).state;
    assert.equal(s.processState, 'Compensating');
    assert.equal(s.steps[0].status, 'Compensating');
  }
  // Silent undo timeouts still give up at the hard threshold.
  for (let i = 0; i < policy.failureHardThreshold; i++) {
    if (s.processState !== 'Compensating') break;
    s = apply(s, { type: 'TimedOut' }, new Date(s.completeBy!.getTime() + 1000)).state;
  }
  assert.equal(s.processState, 'Error');
  assert.equal(s.errorCode, 'CompensationGaveUp');
});

test("a stall after the request waited for a call slot is retried a step timeout after the stall, not at the wait's far complete-by", () => {
  // Bench (issue 26, a 30 s 429 storm at 20/s): a request waiting behind 200 others had its
  // complete-by moved 15 minutes out; its call then stalled on 429s, and the order sat idle in
  // Processing until that complete-by (two orders open past the bench's 300 s drain).
  const waited = apply(
    fx.Processing,
    { type: 'StepWaiting', step: 'inventory', run: 1, attempt: 1, kind: 'do', completeBy: at(900) },
    at(2),
  ).state;
  assert.equal(waited.completeBy?.getTime(), at(900).getTime());
  const stalled = apply(
    waited,
    {
      type: 'StepStalled',
      step: 'inventory',
      run: 1,
      attempt: 1,
      kind: 'do',
      detail: '429 Too Many Requests',
    },
    at(30),
  ).state;
  const retryBy = at(30 + policy.stepTimeoutSeconds).getTime();
  assert.equal(stalled.steps[0].completeBy?.getTime(), retryBy);
  assert.equal(stalled.completeBy?.getTime(), retryBy);
  const retried = apply(stalled, { type: 'TimedOut' }, new Date(retryBy + 1));
  assert.equal(retried.state.processState, 'Pending', 'the Supervisor hands it back to the Scheduler then');
  assert.equal(retried.state.steps[0].stalls, 1);
  assert.equal(retried.state.failureCount, 0, 'without spending the failure budget');
});
