import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StatusEventName } from '../../shared/domain/index.js';
import { isPublished, publishedAt } from '../../shared/domain/statusEvents.js';
import { apply, at, orderId } from './fixtures.js';

const every: StatusEventName[] = [
  'received',
  'step-completed',
  'processed',
  'failed',
  'compensating',
  'compensated',
  'error',
];

describe('status event levels', () => {
  it('step level publishes every event; process level all but the step events', () => {
    assert.deepEqual(
      every.filter((e) => isPublished(e, 'step')),
      every,
    );
    assert.deepEqual(
      every.filter((e) => isPublished(e, 'process')),
      ['received', 'processed', 'compensating', 'compensated', 'error'],
    );
  });

  it('only status commands are dropped: dispatches and the rest go out at either level', () => {
    const claimed = apply(apply(null, { type: 'Submit', orderId }).state, { type: 'Claim', by: 'i' }, at(1));
    const replied = apply(
      claimed.state,
      { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 },
      at(2),
    );
    const kinds = (level: 'process' | 'step') =>
      publishedAt(replied.commands, level).map((c) => (c.type === 'PublishStatus' ? c.event : c.type));
    assert.deepEqual(kinds('step'), ['step-completed', 'DispatchStep']);
    assert.deepEqual(kinds('process'), ['DispatchStep']);
  });
});
