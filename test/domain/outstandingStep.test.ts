import assert from 'node:assert/strict';
import { test } from 'node:test';
import { outstandingStep } from '../../shared/domain/index.js';
import { apply, at, fixtures } from './fixtures.js';

test('outstandingStep names the step an order waits on, with its attempt, and nothing when none', () => {
  const f = fixtures();
  assert.deepEqual(outstandingStep(f.Processing), { step: 'inventory', attempt: 1 });
  const second = apply(f.Processing, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(2));
  assert.deepEqual(outstandingStep(second.state), { step: 'payment', attempt: 1 });
  // Timed out and retried: the re-claim dispatches the same step's next attempt.
  const timedOut = apply(second.state, { type: 'TimedOut' }, at(1000)).state;
  const reclaimed = apply(timedOut, { type: 'Claim', by: 'inv-2' }, at(1001)).state;
  assert.deepEqual(outstandingStep(reclaimed), { step: 'payment', attempt: 2 });
  // Being undone: the step under compensation and its compensation attempt.
  assert.deepEqual(outstandingStep(f.Compensating), { step: 'inventory', attempt: 1 });
  for (const idle of ['Pending', 'Processed', 'Compensated', 'Error'] as const) {
    assert.equal(outstandingStep(f[idle]), undefined, idle);
  }
});
