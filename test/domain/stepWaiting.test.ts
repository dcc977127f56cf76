import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isTransitionRefused, type OrderEvent } from '../../shared/domain/index.js';
import { apply, at, fixtures } from './fixtures.js';

const fx = fixtures();

const waiting = (completeBy: Date, attempt = 1, kind: 'do' | 'compensate' = 'do'): OrderEvent => ({
  type: 'StepWaiting',
  step: 'inventory',
  run: 1,
  attempt,
  kind,
  completeBy,
});

test("waiting for a call slot moves the step's complete-by out; the Supervisor cannot time it out before", () => {
  const before = fx.Processing.completeBy!.getTime();
  const later = new Date(before + 20_000);
  const d = apply(fx.Processing, waiting(later), at(2));
  assert.equal(d.state.processState, 'Processing');
  assert.equal(d.state.completeBy?.getTime(), later.getTime());
  assert.equal(d.state.steps[0].completeBy?.getTime(), later.getTime());
  assert.equal(d.state.failureCount, 0);
  assert.deepEqual(d.commands, []);
  assert.throws(
    () => apply(d.state, { type: 'TimedOut' }, new Date(before + 1_000)),
    (e: unknown) => isTransitionRefused(e) && e.code === 'NotExpired',
  );
});

test('never moves the complete-by in, nor more than a day ahead', () => {
  const before = fx.Processing.completeBy!.getTime();
  const d = apply(fx.Processing, waiting(new Date(before - 1_000)), at(2));
  assert.equal(d.state.completeBy?.getTime(), before);
  assert.throws(
    () => apply(fx.Processing, waiting(new Date(at(2).getTime() + 86_400_001)), at(2)),
    (e: unknown) => isTransitionRefused(e) && e.code === 'InvalidEvent',
  );
});

test('a wait for another attempt is stale; an undo waits the same way', () => {
  assert.throws(
    () => apply(fx.Processing, waiting(at(100), 2), at(2)),
    (e: unknown) => isTransitionRefused(e) && e.code === 'StaleAttempt',
  );
  const before = fx.Compensating.completeBy!.getTime();
  const d = apply(fx.Compensating, waiting(new Date(before + 5_000), 1, 'compensate'), at(3));
  assert.equal(d.state.processState, 'Compensating');
  assert.equal(d.state.completeBy?.getTime(), before + 5_000);
});
