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
