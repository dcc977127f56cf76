import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PullAhead } from '../../shared/agents/pullAhead.js';
import type { PulledMessage } from '../../shared/messaging/bus.js';

/**
 * The request read ahead (issue 26). Its reads and settlements are Service Bus calls, run against
 * the emulator in test/agents/pullWaiting.test.ts; here stand-in messages record what the class
 * does with them: how many reads, which messages go back, and when.
 */
describe('reading the next waiting request ahead', () => {
  const message = (id: string, abandoned: string[]): PulledMessage => ({
    messageId: id,
    body: {},
    deliveryCount: 1,
    complete: async () => undefined,
    abandon: async () => {
      abandoned.push(id);
    },
    deadLetter: async () => undefined,
  });
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('reads once however many loops ask, and the loop that claims the freed slot takes it', async () => {
    const abandoned: string[] = [];
    let reads = 0;
    const ahead = new PullAhead(async () => [message(`m${(reads += 1)}`, abandoned)], 'i');
    ahead.start();
    ahead.start();
    assert.deepEqual(
      (await ahead.take())?.map((m) => m.messageId),
      ['m1'],
    );
    assert.equal(reads, 1);
    assert.equal(await ahead.take(), undefined, 'taken once');
    assert.deepEqual(abandoned, []);
  });

  it('with several slots about to start, as many are read at once and handed out oldest first', async () => {
    // Staged bench (issue 26, 20/s and 8 slots): the rate window frees several starts within a few
    // ms; one request read ahead served the first, and each of the others read its own (40-60 ms
    // each, time the window lost for good).
    const abandoned: string[] = [];
    let reads = 0;
    let inFlight = 0;
    let most = 0;
    const ahead = new PullAhead(async () => {
      const id = `m${(reads += 1)}`;
      most = Math.max(most, (inFlight += 1));
      await sleep(20);
      inFlight -= 1;
      return [message(id, abandoned)];
    }, 'i');
    ahead.start(3);
    ahead.start(3);
    const taken = [await ahead.take(), await ahead.take(), await ahead.take(), await ahead.take()];
    assert.deepEqual(
      taken.map((m) => m?.map((x) => x.messageId)),
      [['m1'], ['m2'], ['m3'], undefined],
    );
    assert.deepEqual([reads, most], [3, 3], 'three reads, all at once');
    ahead.start(2);
    assert.equal(await ahead.giveBack(), 2, 'it says how many went back');
    assert.deepEqual(abandoned, ['m4', 'm5'], 'what no loop started goes back');
    assert.equal(await ahead.giveBack(), 0);
  });

  it('one held too long goes back instead of starting (its lock may be near its end)', async () => {
    const abandoned: string[] = [];
    const ahead = new PullAhead(async () => [message('late', abandoned)], 'i', 50);
    ahead.start();
    await sleep(120);
    assert.deepEqual(await ahead.take(), []);
    assert.deepEqual(abandoned, ['late']);
  });

  it('the last loop gives back what no loop started; a failed read is no request', async () => {
    const abandoned: string[] = [];
    const ahead = new PullAhead(async () => [message('kept', abandoned)], 'i');
    ahead.start();
    await ahead.giveBack();
    assert.deepEqual(abandoned, ['kept']);
    const failing = new PullAhead(() => Promise.reject(new Error('link detached')), 'i');
    failing.start();
    assert.deepEqual(await failing.take(), []);
  });
});
