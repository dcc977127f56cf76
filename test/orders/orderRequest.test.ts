import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseOrderRequest } from '../../shared/orders/orderRequest.js';

export const validOrder = {
  customerId: 'cust-1',
  items: [{ sku: 'SKU-1', quantity: 2, unitPrice: 9.99 }],
  shippingAddress: { name: 'Ada', line1: '1 Main St', city: 'Berlin', postalCode: '10115', country: 'DE' },
};

test('a valid order parses', () => {
  const r = parseOrderRequest(validOrder);
  assert.equal(r.ok, true);
});

test('fault-directive SKUs used by the demo services are valid SKUs', () => {
  const r = parseOrderRequest({
    ...validOrder,
    items: [{ sku: 'FAULT:payment:transient:2', quantity: 1, unitPrice: 1 }],
  });
  assert.equal(r.ok, true);
});

const cases: Array<[string, unknown, string]> = [
  ['missing customer', { ...validOrder, customerId: undefined }, '/customerId'],
  ['empty items', { ...validOrder, items: [] }, '/items'],
  ['zero quantity', { ...validOrder, items: [{ sku: 'A', quantity: 0, unitPrice: 1 }] }, '/items/0/quantity'],
  [
    'fractional quantity',
    { ...validOrder, items: [{ sku: 'A', quantity: 1.5, unitPrice: 1 }] },
    '/items/0/quantity',
  ],
  [
    'negative price',
    { ...validOrder, items: [{ sku: 'A', quantity: 1, unitPrice: -1 }] },
    '/items/0/unitPrice',
  ],
  [
    'sub-cent price',
    { ...validOrder, items: [{ sku: 'A', quantity: 1, unitPrice: 1.001 }] },
    '/items/0/unitPrice',
  ],
  ['bad sku', { ...validOrder, items: [{ sku: "x' or 1 eq 1", quantity: 1, unitPrice: 1 }] }, '/items/0/sku'],
  ['unknown field', { ...validOrder, extra: 1 }, '/'],
  [
    'bad country',
    { ...validOrder, shippingAddress: { ...validOrder.shippingAddress, country: 'Germany' } },
    '/shippingAddress/country',
  ],
  [
    'too many items',
    { ...validOrder, items: Array.from({ length: 51 }, () => validOrder.items[0]) },
    '/items',
  ],
  ['not an object', [1, 2], '/'],
];

for (const [name, body, pointer] of cases) {
  test(`refuses ${name} and points at ${pointer}`, () => {
    const r = parseOrderRequest(body);
    assert.equal(r.ok, false);
    if (!r.ok)
      assert.ok(
        r.errors.some((e) => e.pointer === pointer),
        JSON.stringify(r.errors),
      );
  });
}
