import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CustomerIntake, isTransitionRefused, type NotifyScheduler } from '../../shared/domain/index.js';
import { apply, at, orderId, policy, t0 } from './fixtures.js';

const now = t0.getTime();

test("a customer's burst goes at once up to its rate, then one spacing apart", () => {
  const intake = new CustomerIntake(5);
  const delays = Array.from({ length: 8 }, () => intake.book('burst', now).delayMs);
  assert.deepEqual(delays, [0, 0, 0, 0, 0, 200, 400, 600]);
});

test("another customer's order is not held behind a burst", () => {
  const intake = new CustomerIntake(5);
  for (let i = 0; i < 100; i++) intake.book('burst', now);
  assert.equal(intake.book('other', now + 1_000).delayMs, 0);
  assert.equal(intake.turnOf('burst', now + 1_000).delayMs, 100 * 200 - 4 * 200 - 1_000);
});

test('a customer who stops gets its burst back as time passes, never more', () => {
  const intake = new CustomerIntake(2);
  intake.book('c', now);
  intake.book('c', now);
  assert.equal(intake.turnOf('c', now).delayMs, 500);
  assert.equal(intake.turnOf('c', now + 500).delayMs, 0, 'one order later, one more goes at once');
  assert.equal(intake.book('c', now + 60_000).delayMs, 0);
  assert.equal(intake.book('c', now + 60_000).delayMs, 0);
  assert.equal(intake.book('c', now + 60_000).delayMs, 500, 'the burst is its rate, however long it waited');
});

test('a turn given back goes to the next order, never below now', () => {
  const intake = new CustomerIntake(2);
  intake.book('c', now);
  intake.book('c', now);
  intake.book('c', now);
  intake.giveBack('c');
  assert.equal(intake.turnOf('c', now).delayMs, 500, 'two recorded: the third is one spacing out');
  intake.giveBack('c');
  intake.giveBack('c');
  intake.giveBack('c');
  assert.equal(intake.book('c', now).delayMs, 0);
  assert.equal(intake.book('c', now).delayMs, 0, 'a burst is never more than the rate');
  assert.equal(intake.book('c', now).delayMs, 500);
  intake.giveBack('unknown');
  assert.equal(intake.booked, 1);
});

test('turnOf books nothing; a rate below one a second still lets one order through at once', () => {
  const intake = new CustomerIntake(0.5);
  assert.equal(intake.turnOf('c', now).delayMs, 0);
  assert.equal(intake.turnOf('c', now).delayMs, 0);
  assert.equal(intake.book('c', now).delayMs, 0);
  assert.equal(intake.book('c', now).delayMs, 2_000);
  assert.throws(() => new CustomerIntake(0), RangeError);
  assert.throws(() => new CustomerIntake(Number.NaN), RangeError);
});

test('customers whose turn has passed are forgotten once many are booked', () => {
  const intake = new CustomerIntake(10);
  for (let i = 0; i < 1_100; i++) intake.book(`c${i}`, now);
  assert.equal(intake.booked, 1_100, 'each is 100 ms ahead: none is forgotten yet');
  intake.book('late', now + 1_000);
  assert.equal(intake.booked, 1, 'only the one still ahead is kept');
});

test('Submit with a turn ahead: Pending, its claim message scheduled then, complete-by a claim timeout after it', () => {
  const turn = at(7);
  const { state, commands } = apply(null, { type: 'Submit', orderId, notBefore: turn }, t0);
  assert.equal(state.processState, 'Pending');
  assert.equal(state.scheduledFor?.getTime(), turn.getTime());
  assert.equal(state.completeBy?.getTime(), at(7 + policy.claimTimeoutSeconds).getTime());
  const notify = commands.find((c): c is NotifyScheduler => c.type === 'NotifyScheduler');
  assert.equal(notify?.delaySeconds, 7);
  assert.equal(notify?.reason, 'submitted');
  assert.ok(
    commands.some((c) => c.type === 'PublishStatus'),
    'received at once, as any order',
  );
  assert.throws(
    () => apply(state, { type: 'TimedOut' }, at(7 + policy.claimTimeoutSeconds - 1)),
    (e: unknown) => isTransitionRefused(e) && e.code === 'NotExpired',
  );
});

test('Submit with a turn now or past is claimed at once; a turn that is not a date is refused', () => {
  const past = apply(null, { type: 'Submit', orderId, notBefore: at(-5) }, t0);
  assert.equal(past.state.scheduledFor?.getTime(), t0.getTime());
  assert.throws(
    () => apply(null, { type: 'Submit', orderId, notBefore: new Date(Number.NaN) }, t0),
    (e: unknown) => isTransitionRefused(e) && e.code === 'InvalidEvent',
  );
});
