import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadCallBudgetSettings } from '../../shared/config/callLimits.js';
import { SettingsError } from '../../shared/config/settings.js';
import { defaultCustomerShare } from '../../shared/domain/callLine.js';

describe("call budget settings (issue 26): each Agent's limits, the lease, the customer share", () => {
  const declared = { payment: { maxCallsPerSecond: 5, maxConcurrentCalls: 2 }, 'fraud-check': undefined };
  const failsNaming = (env: Record<string, string>, setting: string) =>
    assert.throws(
      () => loadCallBudgetSettings(declared, env),
      (e: unknown) => e instanceof SettingsError && e.message.includes(setting),
      `${JSON.stringify(env)} fails naming ${setting}`,
    );

  it('takes each declared limit, overridden per service by its settings; none lifts one', () => {
    const s = loadCallBudgetSettings(declared, {});
    assert.deepEqual(s.limits, {
      payment: { maxCallsPerSecond: 5, maxConcurrentCalls: 2 },
      'fraud-check': {},
    });
    assert.deepEqual(
      loadCallBudgetSettings(declared, {
        PAYMENT_MAX_CALLS_PER_SECOND: '12.5',
        PAYMENT_MAX_CONCURRENT_CALLS: 'none',
        FRAUD_CHECK_MAX_CONCURRENT_CALLS: '3',
      }).limits,
      { payment: { maxCallsPerSecond: 12.5 }, 'fraud-check': { maxConcurrentCalls: 3 } },
    );
  });

  it('a bad limit fails start-up naming its setting', () => {
    for (const bad of ['0', '-1', 'fast', '1000001'])
      failsNaming({ PAYMENT_MAX_CALLS_PER_SECOND: bad }, 'PAYMENT_MAX_CALLS_PER_SECOND');
    for (const bad of ['0', '1.5', 'many'])
      failsNaming({ FRAUD_CHECK_MAX_CONCURRENT_CALLS: bad }, 'FRAUD_CHECK_MAX_CONCURRENT_CALLS');
  });

  it('the lease defaults to 5 s and is an integer from 1 to 60', () => {
    assert.equal(loadCallBudgetSettings(declared, {}).leaseSeconds, 5);
    assert.equal(loadCallBudgetSettings(declared, { CALL_BUDGET_LEASE_SECONDS: '60' }).leaseSeconds, 60);
    for (const bad of ['0', '61', '1.5', 'soon'])
      failsNaming({ CALL_BUDGET_LEASE_SECONDS: bad }, 'CALL_BUDGET_LEASE_SECONDS');
  });

  it('the pause news may be 1 s old by default, 0 (never look) to 60 s', () => {
    assert.equal(loadCallBudgetSettings(declared, {}).pauseNewsSeconds, 1);
    assert.equal(
      loadCallBudgetSettings(declared, { CALL_BUDGET_PAUSE_NEWS_SECONDS: '0' }).pauseNewsSeconds,
      0,
    );
    assert.equal(
      loadCallBudgetSettings(declared, { CALL_BUDGET_PAUSE_NEWS_SECONDS: '5' }).pauseNewsSeconds,
      5,
    );
    for (const bad of ['-1', '1.5', '61', 'often'])
      failsNaming({ CALL_BUDGET_PAUSE_NEWS_SECONDS: bad }, 'CALL_BUDGET_PAUSE_NEWS_SECONDS');
  });

  it("the customer share defaults to the domain's and is a fraction above 0, at most 1", () => {
    assert.equal(loadCallBudgetSettings(declared, {}).customerShare, defaultCustomerShare);
    assert.equal(loadCallBudgetSettings(declared, { CALL_BUDGET_CUSTOMER_SHARE: '1' }).customerShare, 1);
    for (const bad of ['0', '1.1', 'half'])
      failsNaming({ CALL_BUDGET_CUSTOMER_SHARE: bad }, 'CALL_BUDGET_CUSTOMER_SHARE');
  });
});
