import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { admission, maxRetryAfterSeconds, minRetryAfterSeconds } from '../../shared/domain/index.js';

const now = new Date('2030-01-01T00:10:00.000Z');
const ago = (s: number) => new Date(now.getTime() - s * 1000);

describe('admission: the door refuses new orders only while the intake is behind', () => {
  it('is open when nothing waits, or the backlog cannot be measured', () => {
    assert.deepEqual(admission(undefined, now, 60), { open: true });
  });

  it('is open up to the limit, closed just past it', () => {
    assert.deepEqual(admission(ago(60), now, 60), { open: true });
    const closed = admission(ago(61), now, 60);
    assert.equal(closed.open, false);
    if (!closed.open) {
      assert.equal(closed.backlogSeconds, 61);
      assert.equal(closed.limitSeconds, 60);
      assert.equal(closed.retryAfterSeconds, minRetryAfterSeconds);
    }
  });

  it('a limit of 0 keeps the door open whatever the backlog', () => {
    assert.deepEqual(admission(ago(86_400), now, 0), { open: true });
  });

  it('asks for about the excess, bounded to 5..60 s', () => {
    const r = admission(ago(100), now, 60);
    assert.equal(r.open === false && r.retryAfterSeconds, 40);
    const far = admission(ago(10_000), now, 60);
    assert.equal(far.open === false && far.retryAfterSeconds, maxRetryAfterSeconds);
  });

  it('a message stamped in the future (broker clock ahead) never closes the door', () => {
    assert.deepEqual(admission(new Date(now.getTime() + 30_000), now, 1), { open: true });
  });

  it('property: closed exactly when the wait exceeds a positive limit; Retry-After within bounds', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -600, max: 100_000 }),
        fc.integer({ min: 0, max: 3600 }),
        (wait, limit) => {
          const r = admission(ago(wait), now, limit);
          assert.equal(r.open, !(limit > 0 && wait > limit));
          if (!r.open) {
            assert.ok(
              r.retryAfterSeconds >= minRetryAfterSeconds && r.retryAfterSeconds <= maxRetryAfterSeconds,
            );
          }
        },
      ),
    );
  });
});
