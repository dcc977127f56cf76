import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  startRemoteService,
  startRemoteServices,
  type RunningRemoteService,
} from '../../local/remoteServices/index.js';
import { newOrderId, order, post } from './fixtures.js';

// Real services over loopback; each test uses fresh order ids and the ledger is reset between tests.
describe('remote service side-effect ledger', () => {
  let payment: RunningRemoteService;
  let inventory: RunningRemoteService;

  before(async () => {
    payment = await startRemoteService({ name: 'payment' });
    inventory = await startRemoteService({ name: 'inventory' });
  });
  after(async () => {
    await payment.stop();
    await inventory.stop();
  });
  beforeEach(async () => {
    await post(payment.url, '_admin/reset', {});
    await post(inventory.url, '_admin/reset', {});
  });

  test('a repeated key is answered from the ledger with one effect', async () => {
    const id = newOrderId();
    const first = await post(payment.url, 'charge', order(id), { 'Idempotency-Key': `${id}:payment` });
    const second = await post(payment.url, 'charge', order(id), { 'Idempotency-Key': `${id}:payment` });
    assert.equal(first.status, 200);
    assert.equal(second.status, 200);
    assert.deepEqual(second.body, first.body);
    assert.equal((first.body as { amount: number }).amount, 25);
    assert.match((first.body as { chargeId: string }).chargeId, /^ch_[0-9a-f]{16}$/);

    const ledger = payment.ledger();
    assert.equal(ledger.counts.effects, 1);
    assert.equal(ledger.counts.duplicatesAbsorbed, 1);
    assert.equal(ledger.effects[0].idempotencyKey, `${id}:payment`);
    assert.deepEqual(
      ledger.requests.map((r) => [r.attempt, r.status, r.outcome]),
      [
        [1, 200, 'performed'],
        [2, 200, 'repeat'],
      ],
    );
  });

  test('different keys are different effects, with different results', async () => {
    const a = newOrderId();
    const b = newOrderId();
    const ra = await post(inventory.url, 'reserve', order(a), { 'Idempotency-Key': `${a}:inventory` });
    const rb = await post(inventory.url, 'reserve', order(b), { 'Idempotency-Key': `${b}:inventory` });
    assert.notDeepEqual(ra.body, rb.body);
    assert.equal(inventory.ledger().counts.effects, 2);
  });

  test('a key reused for another order is a 409 conflict with no effect', async () => {
    const a = newOrderId();
    const b = newOrderId();
    await post(payment.url, 'charge', order(a), { 'Idempotency-Key': 'shared-key' });
    const reused = await post(payment.url, 'charge', order(b), { 'Idempotency-Key': 'shared-key' });
    assert.equal(reused.status, 409);
    assert.equal(reused.contentType, 'application/problem+json');
    const ledger = payment.ledger();
    assert.equal(ledger.counts.effects, 1);
    assert.equal(ledger.counts.keyConflicts, 1);
  });

  test('a compensation happens once, whatever key its repeats carry', async () => {
    const id = newOrderId();
    const key = `${id}:payment`;
    await post(payment.url, 'charge', order(id), { 'Idempotency-Key': key });
    const body = { ...order(id), originalIdempotencyKey: key };
    const first = await post(payment.url, 'refund', body, { 'Idempotency-Key': `${key}:compensate` });
    const again = await post(payment.url, 'refund', body, { 'Idempotency-Key': `${key}:compensate` });
    const otherKey = await post(payment.url, 'refund', body, { 'Idempotency-Key': `${key}:compensate-2` });
    assert.equal(first.status, 200);
    assert.deepEqual(first.body, {
      compensated: true,
      refundId: (first.body as { refundId: string }).refundId,
      amount: 25,
    });
    assert.deepEqual(again.body, first.body);
    assert.deepEqual(otherKey.body, first.body);

    const ledger = payment.ledger();
    assert.equal(ledger.counts.compensations, 1);
    assert.equal(ledger.counts.compensationDuplicatesAbsorbed, 2);
    assert.equal(ledger.counts.tombstones, 0);
    assert.equal(ledger.compensations[0].originalIdempotencyKey, key);
    // A repeat of the original action after its compensation is still only a repeat.
    const late = await post(payment.url, 'charge', order(id), { 'Idempotency-Key': key });
    assert.equal(late.status, 200);
    assert.equal(payment.ledger().counts.effects, 1);
  });

  test('compensating an action that never happened leaves a tombstone that refuses the late action', async () => {
    const id = newOrderId();
    const key = `${id}:payment`;
    const refund = await post(
      payment.url,
      'refund',
      { ...order(id), originalIdempotencyKey: key },
      { 'Idempotency-Key': `${key}:compensate` },
    );
    assert.equal(refund.status, 200);
    assert.deepEqual(refund.body, { tombstone: true, compensated: false });

    const late = await post(payment.url, 'charge', order(id), { 'Idempotency-Key': key });
    assert.equal(late.status, 409);
    assert.equal((late.body as { type: string }).type, 'urn:order-processing:problem:tombstoned');
    const lateAgain = await post(payment.url, 'charge', order(id), { 'Idempotency-Key': key });
    assert.equal(lateAgain.status, 409);

    const ledger = payment.ledger();
    assert.equal(ledger.counts.effects, 0);
    assert.equal(ledger.counts.tombstones, 1);
    assert.equal(ledger.counts.compensations, 0);
    assert.equal(ledger.counts.refusedAfterTombstone, 2);
  });

  test("a compensation naming another order's action is refused", async () => {
    const id = newOrderId();
    const key = `${id}:inventory`;
    await post(inventory.url, 'reserve', order(id), { 'Idempotency-Key': key });
    const wrongOrder = await post(
      inventory.url,
      'release',
      { ...order(newOrderId()), originalIdempotencyKey: key },
      { 'Idempotency-Key': `${key}:compensate` },
    );
    assert.equal(wrongOrder.status, 409);
    assert.equal(inventory.ledger().counts.compensations, 0);
    assert.equal(inventory.ledger().counts.tombstones, 0);
  });

  test('bad input gets a 400 problem and changes nothing', async () => {
    const id = newOrderId();
    const key = { 'Idempotency-Key': `${id}:payment` };
    const cases: [string, unknown, Record<string, string>][] = [
      ['charge', order(id), {}],
      ['charge', order(id), { 'Idempotency-Key': '   ' }],
      ['charge', '{not json', key],
      ['charge', { ...order(id), items: [] }, key],
      ['charge', { ...order(id), items: [{ sku: 'X', quantity: -1, unitPrice: 1 }] }, key],
      ['charge', { ...order(id), orderId: undefined }, key],
      ['charge', order(id, ['FAULT:payment:explode']), key],
      ['charge', order(id, ['FAULT:billing:transient']), key],
      ['charge', order(id, ['FAULT:payment:permanent:3']), key],
      ['charge', order(id, ['FAULT:payment:slow']), key],
      ['refund', order(id), key],
    ];
    for (const [operation, body, headers] of cases) {
      const res = await post(payment.url, operation, body, headers);
      assert.equal(res.status, 400, `${operation} ${JSON.stringify(body)} ${JSON.stringify(headers)}`);
      assert.equal(res.contentType, 'application/problem+json');
      const problem = res.body as { title: string; status: number; detail: string };
      assert.equal(problem.status, 400);
      assert.ok(problem.detail.length > 0);
    }
    const ledger = payment.ledger();
    assert.equal(ledger.counts.requests, 0);
    assert.equal(ledger.counts.effects, 0);
  });

  test('unknown operations are 404 and the wrong method is 405', async () => {
    const id = newOrderId();
    const onInventory = await post(inventory.url, 'charge', order(id), { 'Idempotency-Key': 'k' });
    assert.equal(onInventory.status, 404);
    const get = await fetch(`${inventory.url}/reserve`);
    assert.equal(get.status, 405);
    assert.equal(inventory.ledger().counts.requests, 0);
  });

  test('the admin API serves the ledger and resets it', async () => {
    const id = newOrderId();
    await post(inventory.url, 'reserve', order(id), { 'Idempotency-Key': `${id}:inventory` });
    const res = await fetch(`${inventory.url}/_admin/ledger`);
    const ledger = (await res.json()) as { service: string; counts: { effects: number } };
    assert.equal(ledger.service, 'inventory');
    assert.equal(ledger.counts.effects, 1);
    const reset = await post(inventory.url, '_admin/reset', {});
    assert.equal(reset.status, 200);
    assert.equal(inventory.ledger().counts.effects, 0);
    assert.equal(inventory.ledger().counts.requests, 0);
  });
});

test('startRemoteServices starts all three on their own ports and stops them', async () => {
  const services = await startRemoteServices();
  try {
    const urls = new Set([services.inventory.url, services.payment.url, services.shipping.url]);
    assert.equal(urls.size, 3);
    for (const url of urls) assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const id = newOrderId();
    const shipment = await post(services.shipping.url, 'create-shipment', order(id), {
      'Idempotency-Key': `${id}:shipping`,
    });
    assert.equal(shipment.status, 200);
    assert.match((shipment.body as { shipmentId: string }).shipmentId, /^shp_/);
    const cancel = await post(
      services.shipping.url,
      'cancel-shipment',
      { ...order(id), originalIdempotencyKey: `${id}:shipping` },
      { 'Idempotency-Key': `${id}:shipping:compensate` },
    );
    assert.deepEqual(cancel.body, {
      compensated: true,
      cancelledShipmentId: (shipment.body as { shipmentId: string }).shipmentId,
    });
  } finally {
    await services.stop();
  }
  await assert.rejects(fetch(`${services.payment.url}/health`));
});
