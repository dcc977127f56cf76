import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import { decide, makePolicy, orderWorkflow } from '../../shared/domain/index.js';
import { StateStore } from '../../shared/stateStore/index.js';
import { at, newOrder } from './harness.js';

/**
 * The claim timeout is its own setting and may be much longer than a step's (60 s by default,
 * against 3 s steps in the tests). A step's complete-by is set after the index row was put with
 * the claim's, so a row that waits for the claim's complete-by would hide an expired step from
 * the sweep for up to a claim timeout. The index therefore never waits longer than the shortest
 * complete-by a later transition can set.
 */
const policy = makePolicy({
  stepTimeoutSeconds: 10,
  claimTimeoutSeconds: 600,
  failureSoftThreshold: 2,
  failureHardThreshold: 4,
  extendedBackoffSeconds: 5,
});

let azurite: AzuriteInstance;
let store: StateStore;

before(async () => {
  azurite = await startAzurite({ services: ['table'] });
  const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
  store = await StateStore.open(
    { kind: 'connectionString', connectionString: azurite.connectionString },
    {
      ordersTable: `Orders${suffix}`,
      inFlightTable: `InFlight${suffix}`,
      indexRecheckSeconds: Math.min(policy.stepTimeoutSeconds, policy.claimTimeoutSeconds),
    },
  );
});
after(async () => {
  await azurite.stop();
});

test('a step that expires long before its claim timeout would have is found by the next sweep', async () => {
  const orderId = randomUUID();
  const submitted = decide(orderWorkflow, null, { type: 'Submit', orderId }, at(0), policy);
  const stored = await store.submit(newOrder(orderId), submitted.state); // claim complete-by: 600 s
  const claim = decide(orderWorkflow, stored.state, { type: 'Claim', by: 'A' }, at(1), policy);
  await store.save(stored, claim.state); // step complete-by: 11 s
  const sweep = await store.index.sweep(at(20));
  assert.deepEqual(
    sweep.timedOut.map((c) => c.orderId),
    [orderId],
    'the step expired at 11 s; the sweep at 20 s must return it, not wait for 600 s',
  );
});

test('a Pending order is re-checked every recheck period, and returned only once its claim has expired', async () => {
  const orderId = randomUUID();
  const submitted = decide(orderWorkflow, null, { type: 'Submit', orderId }, at(1000), policy);
  await store.submit(newOrder(orderId), submitted.state);
  // The first test's order is still in the index (expired): look at this order only.
  const mine = (r: { timedOut: Array<{ orderId: string }> }) => r.timedOut.some((c) => c.orderId === orderId);
  const early = await store.index.sweep(at(1015));
  assert.equal(mine(early), false);
  assert.equal(early.deferred, 1, 'examined and deferred again, at most one recheck period ahead');
  const stillEarly = await store.index.sweep(at(1030));
  assert.equal(mine(stillEarly), false);
  assert.equal(stillEarly.deferred, 1, 'read again one recheck period later, not at its claim timeout');
  assert.equal(mine(await store.index.sweep(at(1601))), true);
});
