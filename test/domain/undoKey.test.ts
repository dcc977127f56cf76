import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DispatchStep, OrderState } from '../../shared/domain/index.js';
import { apply, at, fixtures, orderId } from './fixtures.js';

const fx = fixtures();

/** Run 1: inventory and payment done, shipping refused, the refund refused: Error. */
function refusedUndo(): OrderState {
  let s = fx.Processing;
  s = apply(s, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(2)).state;
  s = apply(s, { type: 'StepSucceeded', step: 'payment', run: 1, attempt: 1 }, at(3)).state;
  s = apply(
    s,
    { type: 'StepFailedPermanently', step: 'shipping', run: 1, attempt: 1, error: 'x' },
    at(4),
  ).state;
  const d = apply(s, { type: 'CompensationFailed', step: 'payment', run: 1, attempt: 1, error: 'no' }, at(5));
  assert.equal(d.state.processState, 'Error');
  return d.state;
}

test('a resubmit undoes a step whose undo was refused under a new undo key', () => {
  let s = refusedUndo();
  s = apply(s, { type: 'OperatorResubmit', by: 'op' }, at(6)).state;
  s = apply(s, { type: 'Claim', by: 'x' }, at(7)).state;
  // The charge is redone under its run-1 key (answered from the service's record)...
  s = apply(s, { type: 'StepSucceeded', step: 'payment', run: 2, attempt: 1 }, at(8)).state;
  // ...and shipping is refused again, so the payment has to be undone again.
  const d = apply(
    s,
    { type: 'StepFailedPermanently', step: 'shipping', run: 2, attempt: 1, error: 'x' },
    at(9),
  );
  const undo = d.commands.find((c): c is DispatchStep => c.type === 'DispatchStep');
  assert.ok(undo);
  assert.equal(undo.step, 'payment');
  assert.equal(undo.kind, 'compensate');
  // The refund undoes the run-1 charge...
  assert.equal(undo.actionIdempotencyKey, `${orderId}:payment`);
  // ...but not under the refused refund's key, which a provider caching answers per key refuses again.
  assert.notEqual(undo.idempotencyKey, `${orderId}:payment:compensate`);
  assert.equal(undo.idempotencyKey, `${orderId}:payment:compensate:run2`);
});

test('an undo in the run that did the action keeps its key', () => {
  const s = fx.Processing;
  const d = apply(s, { type: 'OperatorCancel', by: 'op' }, at(2));
  const undo = d.commands.find((c): c is DispatchStep => c.type === 'DispatchStep');
  assert.equal(undo?.idempotencyKey, `${orderId}:inventory:compensate`);
});
