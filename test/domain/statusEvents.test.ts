import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StatusEventName } from '../../shared/domain/index.js';
import { isPublished, publishedAt, type StatusEventLevel } from '../../shared/domain/statusEvents.js';
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
  it('step level publishes every event; process level all but the step events; none level nothing', () => {
    assert.deepEqual(
      every.filter((e) => isPublished(e, 'step')),
      every,
    );
    assert.deepEqual(
      every.filter((e) => isPublished(e, 'process')),
      ['received', 'processed', 'compensating', 'compensated', 'error'],
    );
    assert.deepEqual(
      every.filter((e) => isPublished(e, 'none')),
      [],
    );
  });

  it('only status commands are dropped: dispatches and the rest go out at every level', () => {
    const claimed = apply(apply(null, { type: 'Submit', orderId }).state, { type: 'Claim', by: 'i' }, at(1));
    const replied = apply(
      claimed.state,
      { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 },
      at(2),
    );
    const kinds = (level: StatusEventLevel) =>
      publishedAt(replied.commands, level).map((c) => (c.type === 'PublishStatus' ? c.event : c.type));
    assert.deepEqual(kinds('step'), ['step-completed', 'DispatchStep']);
    assert.deepEqual(kinds('process'), ['DispatchStep']);
    assert.deepEqual(kinds('none'), ['DispatchStep']);
  });
});
