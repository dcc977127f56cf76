import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { emptyBudgetRow } from '../../shared/domain/callBudget.js';
import { orderWorkflowVersions } from '../../shared/domain/orderWorkflow.js';
import {
  declaredServiceLimits,
  serviceLimitsSchema,
  serviceLimitView,
} from '../../shared/orders/serviceLimitViews.js';
import type { ReportedGrant } from '../../shared/stateStore/callBudgetTable.js';

/** The service-limits readout from a lease row and a health row: what counts, what is left out. */
const now = new Date('2026-11-26T08:00:00Z');
const t = now.getTime();

function grant(instance: string, fields: Partial<ReportedGrant>): ReportedGrant {
  return {
    instance,
    rate: 5,
    concurrency: 2,
    wantRate: 5,
    wantConcurrency: 2,
    expiresAt: t + 3_000,
    ...fields,
  };
}

const limits = { maxCallsPerSecond: 20, maxConcurrentCalls: 8 };

describe('the service-limits readout', () => {
  it('sums the live grants and their reports, and names the oldest waiting order among them', () => {
    const row = {
      ...emptyBudgetRow,
      grants: [
        grant('a', {
          waiting: 3,
          oldestWaitingSince: t - 12_000,
          oldestWaitingOrder: 'order-a',
          startedPerSecond: 4,
        }),
        grant('b', {
          waiting: 2,
          oldestWaitingSince: t - 30_000,
          oldestWaitingOrder: 'order-b',
          startedPerSecond: 6.5,
        }),
        // Expired beyond the grace: its share and its report no longer count.
        grant('c', { expiresAt: t - 5_000, waiting: 9, oldestWaitingSince: t - 99_000, startedPerSecond: 9 }),
      ],
    };
    const v = serviceLimitView('payment', limits, row, null, now);
    assert.equal(v.instances, 2);
    assert.equal(v.waiting, 5);
    assert.equal(v.currentRate, 10.5);
    assert.deepEqual(v.granted, { rate: 10, concurrency: 4 });
    assert.deepEqual(v.oldestWaiting, {
      orderId: 'order-b',
      since: new Date(t - 30_000).toISOString(),
      ageSeconds: 30,
    });
    assert.deepEqual(v.limits, { maxCallsPerSecond: 20, maxConcurrentCalls: 8 });
    assert.equal(v.rateInForce, 20);
    assert.equal(v.pausedUntil, null);
    assert.deepEqual(v.outage, {
      open: false,
      consecutiveFailures: 0,
      outages: 0,
      lastStatus: null,
      since: null,
    });
    assert.ok(
      serviceLimitsSchema.safeParse({ services: [v], leaseSeconds: 5, asOf: now.toISOString() }).success,
    );
  });

  it('shows a pause from a 429 (rate 0 until it ends), the halved rate after it, and an open outage', () => {
    const refused = {
      ...emptyBudgetRow,
      grants: [],
      pausedUntil: t + 20_000,
      rateFactor: 0.5,
      refusedAt: t - 1_000,
      pauses: 3,
    };
    const health = {
      consecutiveFailures: 6,
      outages: 2,
      open: true,
      alertSent: true,
      lastStatus: 503,
      lastDetail: 'down',
      since: new Date(t - 60_000),
    };
    const paused = serviceLimitView('payment', limits, refused, health, now);
    assert.equal(paused.rateInForce, 0);
    assert.equal(paused.pausedUntil, new Date(t + 20_000).toISOString());
    assert.equal(paused.lastRefusalAt, new Date(t - 1_000).toISOString());
    assert.equal(paused.pauses, 3);
    assert.equal(paused.rateFactor, 0.5);
    assert.deepEqual(paused.outage, {
      open: true,
      consecutiveFailures: 6,
      outages: 2,
      lastStatus: 503,
      since: new Date(t - 60_000).toISOString(),
    });
    const after = serviceLimitView('payment', limits, refused, null, new Date(t + 21_000));
    assert.equal(after.rateInForce, 10, 'half the limit once the pause is over');
    assert.equal(after.pausedUntil, null);
  });

  it('a service without limits: null where there is no limit (JSON has no infinity), nothing waiting', () => {
    const row = { ...emptyBudgetRow, grants: [] };
    const v = serviceLimitView('inventory', {}, row, null, now);
    assert.deepEqual(v.limits, { maxCallsPerSecond: null, maxConcurrentCalls: null });
    assert.equal(v.rateInForce, null);
    assert.deepEqual(v.granted, { rate: null, concurrency: null });
    assert.equal(v.waiting, 0);
    assert.equal(v.oldestWaiting, null);
    // A grant written by a rate-only limit holds concurrency Infinity, stored as null.
    const rateOnly = serviceLimitView(
      'payment',
      { maxCallsPerSecond: 4 },
      { ...emptyBudgetRow, grants: [grant('a', { concurrency: null as unknown as number })] },
      null,
      now,
    );
    assert.deepEqual(rateOnly.granted, { rate: 5, concurrency: null });
  });

  it('the services are the Agents the workflows call: approval steps call none', () => {
    const declared = declaredServiceLimits(orderWorkflowVersions.all);
    assert.deepEqual(Object.keys(declared).sort(), ['inventory', 'payment', 'shipping']);
  });
});
