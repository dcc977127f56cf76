import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Dependencies } from '../../shared/app/ports.js';
import { ManualClock, orderWorkflowVersions } from '../../shared/domain/index.js';
import { runSupervisor } from '../../shared/supervisor/supervisor.js';
import { context } from '../app/direct.js';
import { policy } from '../stateStore/harness.js';
import { daysAfter, orderIn, retentionAzurite, withRetention } from './harness.js';

/**
 * The Supervisor runs the purge: one bounded slice per run (the rate over the run interval),
 * oldest first, until nothing past retention is left; an idle run then skips the purge.
 */
const azurite = retentionAzurite();

const t0 = new Date('2030-01-01T00:00:00.000Z');

test('each Supervisor run purges one slice of at most rate x interval orders, oldest first', async () => {
  const { store, retention } = await withRetention(azurite(), { purgeRatePerSecond: 2 });
  const orders = [];
  for (let i = 0; i < 5; i++) orders.push(await orderIn(store, 'Processed', daysAfter(t0, i)));
  const deps = {
    store,
    retention,
    clock: new ManualClock(daysAfter(t0, 100)),
    policy,
    workflows: orderWorkflowVersions,
  } as unknown as Dependencies;
  const first = await runSupervisor(deps, context('supervisor'), { runIntervalSeconds: 1 });
  assert.equal(first.purge?.purged, 2);
  // The oldest two went first.
  assert.equal(await store.load(orders[0].order.orderId), null);
  assert.equal(await store.load(orders[1].order.orderId), null);
  assert.ok(await store.load(orders[2].order.orderId));
  const second = await runSupervisor(deps, context('supervisor'), { runIntervalSeconds: 1 });
  assert.equal(second.purge?.purged, 2);
  const third = await runSupervisor(deps, context('supervisor'), { runIntervalSeconds: 1 });
  assert.equal(third.purge?.purged, 1);
  assert.equal(third.purge?.more, false);
  // Nothing left: the next run does not purge (idle back-off), and costs no purge reads.
  const idle = await runSupervisor(deps, context('supervisor'), { runIntervalSeconds: 1 });
  assert.equal(idle.purge, undefined);
  assert.equal((await store.countsPerState()).Processed, 0);
});

test('without retention the Supervisor does as before', async () => {
  const { store } = await withRetention(azurite());
  const deps = {
    store,
    clock: new ManualClock(daysAfter(t0, 100)),
    policy,
    workflows: orderWorkflowVersions,
  } as unknown as Dependencies;
  const report = await runSupervisor(deps, context('supervisor'));
  assert.equal(report.purge, undefined);
});
