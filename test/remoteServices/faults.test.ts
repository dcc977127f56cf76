import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { faultSku, startRemoteService, type RunningRemoteService } from '../../local/remoteServices/index.js';
import { newOrderId, order, post, waitFor } from './fixtures.js';

describe('fault injection', () => {
  let payment: RunningRemoteService;

  before(async () => {
    payment = await startRemoteService({ name: 'payment' });
  });
  after(async () => {
    await payment.stop();
  });
  beforeEach(async () => {
    payment.setFaults({});
    await post(payment.url, '_admin/reset', {});
  });

  const charge = (id: string, skus: string[], signal?: AbortSignal) =>
    post(payment.url, 'charge', order(id, skus), { 'Idempotency-Key': `${id}:payment` }, signal);

  test('transient answers 503 to the first n attempts of a key, then performs the effect once', async () => {
    const id = newOrderId();
    const statuses = [];
    for (let i = 0; i < 4; i++)
      statuses.push((await charge(id, [faultSku('payment', 'transient', 2)])).status);
    assert.deepEqual(statuses, [503, 503, 200, 200]);
    const ledger = payment.ledger();
    assert.equal(ledger.counts.effects, 1);
    assert.equal(ledger.counts.faultsInjected.transient, 2);
    // The default n is 2, and the count is per key: another order starts over.
    const other = newOrderId();
    assert.equal((await charge(other, ['FAULT:payment:transient'])).status, 503);
  });

  test('throttle answers 429 with Retry-After: 1 for the first n attempts', async () => {
    const id = newOrderId();
    const first = await charge(id, ['FAULT:payment:throttle:1']);
    assert.equal(first.status, 429);
    assert.equal(first.retryAfter, '1');
    assert.equal(first.contentType, 'application/problem+json');
    assert.equal((await charge(id, ['FAULT:payment:throttle:1'])).status, 200);
  });

  test('permanent answers 422 every time and never performs the effect', async () => {
    const id = newOrderId();
    for (let i = 0; i < 3; i++) {
      const res = await charge(id, ['FAULT:payment:permanent']);
      assert.equal(res.status, 422);
      assert.equal(res.contentType, 'application/problem+json');
    }
    assert.equal(payment.ledger().counts.effects, 0);
  });

  test('a fault named for another service is ignored', async () => {
    const id = newOrderId();
    const res = await charge(id, ['FAULT:inventory:permanent', 'FAULT:shipping:transient:5']);
    assert.equal(res.status, 200);
    assert.equal(payment.ledger().counts.effects, 1);
  });

  test('hang holds the first attempt until the client gives up, without an effect', async () => {
    const id = newOrderId();
    await assert.rejects(charge(id, ['FAULT:payment:hang'], AbortSignal.timeout(300)));
    await waitFor(
      () => payment.ledger().requests[0]?.outcome === 'hung until the client gave up',
      'the hang to end',
    );
    assert.equal(payment.ledger().counts.effects, 0);
    assert.equal(payment.ledger().requests[0].status, null);
    const second = await charge(id, ['FAULT:payment:hang']);
    assert.equal(second.status, 200);
    assert.equal(payment.ledger().counts.effects, 1);
  });

  test('slow delays the answer by at least the given milliseconds', async () => {
    const id = newOrderId();
    const started = Date.now();
    const res = await charge(id, ['FAULT:payment:slow:300']);
    assert.equal(res.status, 200);
    assert.ok(Date.now() - started >= 290, 'answered before the injected latency');
    assert.equal(payment.ledger().counts.faultsInjected.slow, 1);
  });

  test('lost-reply performs the effect but drops the answer; the retry is absorbed', async () => {
    const id = newOrderId();
    await assert.rejects(charge(id, ['FAULT:payment:lost-reply']));
    assert.equal(payment.ledger().counts.effects, 1);
    const retry = await charge(id, ['FAULT:payment:lost-reply']);
    assert.equal(retry.status, 200);
    const ledger = payment.ledger();
    assert.equal(ledger.counts.effects, 1);
    assert.equal(ledger.counts.duplicatesAbsorbed, 1);
  });

  test('compensation-fails answers 422 to the compensation and undoes nothing', async () => {
    const id = newOrderId();
    const skus = ['FAULT:payment:compensation-fails'];
    assert.equal((await charge(id, skus)).status, 200);
    const refund = () =>
      post(
        payment.url,
        'refund',
        { ...order(id, skus), originalIdempotencyKey: `${id}:payment` },
        { 'Idempotency-Key': `${id}:payment:compensate` },
      );
    assert.equal((await refund()).status, 422);
    assert.equal((await refund()).status, 422);
    const ledger = payment.ledger();
    assert.equal(ledger.counts.compensations, 0);
    assert.equal(ledger.counts.tombstones, 0);
  });

  test('compensation-transient answers 503 to the first n compensation attempts', async () => {
    const id = newOrderId();
    const skus = ['FAULT:payment:compensation-transient:1'];
    assert.equal((await charge(id, skus)).status, 200);
    const refund = () =>
      post(
        payment.url,
        'refund',
        { ...order(id, skus), originalIdempotencyKey: `${id}:payment` },
        { 'Idempotency-Key': `${id}:payment:compensate` },
      );
    assert.equal((await refund()).status, 503);
    assert.equal((await refund()).status, 200);
    assert.equal((await refund()).status, 200);
    const ledger = payment.ledger();
    assert.equal(ledger.counts.compensations, 1);
    assert.equal(ledger.counts.compensationDuplicatesAbsorbed, 1);
  });

  test('service-wide transientRate, set through the admin API, fails requests before any effect', async () => {
    const set = await post(payment.url, '_admin/faults', { transientRate: 1 });
    assert.equal(set.status, 200);
    const res = await charge(newOrderId(), []);
    assert.equal(res.status, 503);
    assert.equal(payment.ledger().counts.effects, 0);
    const bad = await post(payment.url, '_admin/faults', { transientRate: 2 });
    assert.equal(bad.status, 400);
    const unknown = await post(payment.url, '_admin/faults', { chaos: true });
    assert.equal(unknown.status, 400);
  });

  test('a seed makes the service-wide faults reproducible', async () => {
    const run = async () => {
      payment.setFaults({ transientRate: 0.5, seed: 42 });
      const statuses: number[] = [];
      for (let i = 0; i < 16; i++) statuses.push((await charge(newOrderId(), [])).status);
      return statuses;
    };
    const first = await run();
    const second = await run();
    assert.deepEqual(second, first);
    assert.ok(first.includes(503) && first.includes(200), `expected a mix, got ${first.join(',')}`);
  });

  test('hangRate holds requests, and stop() still returns', async () => {
    const service = await startRemoteService({ name: 'shipping', faults: { hangRate: 1 } });
    const id = newOrderId();
    const pending = post(service.url, 'create-shipment', order(id), { 'Idempotency-Key': `${id}:shipping` });
    pending.catch(() => undefined);
    await waitFor(() => service.ledger().counts.requests === 1, 'the request to arrive');
    await service.stop();
    await assert.rejects(pending);
    assert.equal(service.ledger().counts.effects, 0);
  });
});
