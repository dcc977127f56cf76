import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deadLetterSources, redriveTargetOf } from '../../shared/domain/deadLetters.js';

/** Where a redriven dead letter goes, above all a quarantined poison message (issue 27 item 7). */
describe('redrive targets', () => {
  const appQueues = ['scheduler', 'agent-payment', 'operator-alerts', 'poison'];
  const [scheduler, payment, , poison, all] = deadLetterSources(appQueues, { 'order-status': ['all'] });

  it('a queue redrives to itself and a subscription to its topic, whatever the message says', () => {
    assert.equal(redriveTargetOf(scheduler!, 'poison', 'agent-payment', appQueues), 'scheduler');
    assert.equal(redriveTargetOf(payment!, 'poison', undefined, appQueues), 'agent-payment');
    assert.equal(redriveTargetOf(all!, 'poison', 'scheduler', appQueues), 'order-status');
  });

  it('a quarantined message goes back to the queue it came from', () => {
    assert.equal(redriveTargetOf(poison!, 'poison', 'scheduler', appQueues), 'scheduler');
    assert.equal(redriveTargetOf(poison!, 'poison', 'agent-payment', appQueues), 'agent-payment');
  });

  it('a quarantined message naming no app queue, or the quarantine itself, goes nowhere', () => {
    for (const origin of [undefined, null, 42, '', 'elsewhere', 'poison', 'order-status', 'SCHEDULER'])
      assert.equal(redriveTargetOf(poison!, 'poison', origin, appQueues), null, String(origin));
  });
});
