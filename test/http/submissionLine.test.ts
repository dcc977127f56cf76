import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SubmissionLine } from '../../shared/http/submissionLine.js';

const tick = () => new Promise<void>((r) => setImmediate(r));

test("a customer's submissions beyond its share at once wait in its line, in arrival order", async () => {
  const line = new SubmissionLine(2, 10);
  const order: number[] = [];
  const releases = new Map<number, () => void>();
  for (let i = 0; i < 5; i++) {
    const entered = line.enter('burst');
    assert.ok(entered, `submission ${i} is taken into the line`);
    void entered.then((release) => {
      order.push(i);
      releases.set(i, release);
    });
  }
  await tick();
  assert.deepEqual(order, [0, 1], 'two at once');
  releases.get(1)!();
  await tick();
  assert.deepEqual(order, [0, 1, 2], 'a slot given back goes to the longest waiting');
  releases.get(0)!();
  releases.get(2)!();
  await tick();
  assert.deepEqual(order, [0, 1, 2, 3, 4]);
  assert.equal(line.waiting('burst'), 0);
});

test("another customer is not held behind a customer's line", async () => {
  const line = new SubmissionLine(1, 100);
  for (let i = 0; i < 50; i++) void line.enter('burst');
  assert.equal(line.waiting('burst'), 49);
  let other = false;
  void line.enter('other')!.then(() => (other = true));
  await tick();
  assert.ok(other, "the other customer's submission goes at once");
});

test('a line full to its limit refuses the next (undefined), and takes one again once it moves', async () => {
  const line = new SubmissionLine(1, 2);
  const first = await line.enter('c')!;
  assert.ok(line.enter('c'));
  assert.ok(line.enter('c'));
  assert.equal(line.enter('c'), undefined, 'a third waiting one is refused');
  first();
  await tick();
  assert.ok(line.enter('c'), 'one moved up: room for one more');
});

test('a release is counted once, and an empty line is forgotten', async () => {
  const line = new SubmissionLine(1, 5);
  const release = await line.enter('c')!;
  let second = false;
  void line.enter('c')!.then((r) => {
    second = true;
    r();
  });
  release();
  release();
  await tick();
  assert.ok(second);
  assert.equal(line.customers, 0, 'nobody in line: nothing kept');
  const again = await line.enter('c')!;
  let third = false;
  void line.enter('c')!.then(() => (third = true));
  await tick();
  assert.equal(third, false, 'a release counted twice would have let a second one in at once');
  again();
});

test('bad limits are refused', () => {
  assert.throws(() => new SubmissionLine(0, 1), RangeError);
  assert.throws(() => new SubmissionLine(1.5, 1), RangeError);
  assert.throws(() => new SubmissionLine(1, -1), RangeError);
});
