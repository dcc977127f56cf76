import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  filterMismatch,
  processStates,
  type FilteredOrder,
  type OrderFilter,
} from '../../shared/domain/index.js';

const time = fc.integer({ min: 0, max: 10_000 }).map((s) => new Date(Date.UTC(2030, 0, 1) + s * 1000));
const order: fc.Arbitrary<FilteredOrder> = fc.record({
  processState: fc.constantFrom(...processStates),
  customerId: fc.constantFrom('c-1', 'c-2'),
  workflowVersion: fc.integer({ min: 1, max: 3 }),
  stateSince: time,
});
const filter: fc.Arbitrary<OrderFilter> = fc.record(
  {
    state: fc.constantFrom(...processStates),
    customerId: fc.constantFrom('c-1', 'c-2'),
    workflowVersion: fc.integer({ min: 1, max: 3 }),
    from: time,
    to: time,
  },
  { requiredKeys: ['state'] },
);

test('an order matches a filter exactly when every criterion given holds (ends inclusive)', () => {
  fc.assert(
    fc.property(filter, order, (f, o) => {
      const matches =
        o.processState === f.state &&
        (f.customerId === undefined || o.customerId === f.customerId) &&
        (f.workflowVersion === undefined || o.workflowVersion === f.workflowVersion) &&
        (f.from === undefined || o.stateSince.getTime() >= f.from.getTime()) &&
        (f.to === undefined || o.stateSince.getTime() <= f.to.getTime());
      const why = filterMismatch(f, o);
      assert.equal(why === undefined, matches, `${JSON.stringify({ f, o })}: ${why}`);
    }),
    { numRuns: 5000 },
  );
});

test('the reason names what no longer matches', () => {
  const since = new Date('2030-01-01T00:00:10Z');
  const o: FilteredOrder = {
    processState: 'Processing',
    customerId: 'c-1',
    workflowVersion: 1,
    stateSince: since,
  };
  assert.equal(filterMismatch({ state: 'Pending' }, o), 'it is Processing, not Pending');
  assert.match(filterMismatch({ state: 'Processing', customerId: 'c-2' }, o)!, /customer/);
  assert.match(filterMismatch({ state: 'Processing', workflowVersion: 2 }, o)!, /version 1, not 2/);
  assert.match(
    filterMismatch({ state: 'Processing', to: new Date('2030-01-01T00:00:09Z') }, o)!,
    /entered Processing at 2030-01-01T00:00:10.000Z, after/,
  );
  assert.equal(filterMismatch({ state: 'Processing', from: since, to: since }, o), undefined);
});
