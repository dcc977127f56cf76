import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadCallBudgetSettings } from '../../shared/config/callLimits.js';
import { SettingsError } from '../../shared/config/settings.js';

describe('call budget settings: the line hold', () => {
  const declared = { payment: { maxCallsPerSecond: 5 } };

  it('defaults to 1 s; 0 turns the line off', () => {
    assert.equal(loadCallBudgetSettings(declared, {}).lineHoldMs, 1_000);
    assert.equal(loadCallBudgetSettings(declared, { CALL_BUDGET_LINE_HOLD_MS: '0' }).lineHoldMs, 0);
  });

  it('a bad value fails naming the setting', () => {
    for (const bad of ['-1', '1.5', 'soon', '5001'])
      assert.throws(
        () => loadCallBudgetSettings(declared, { CALL_BUDGET_LINE_HOLD_MS: bad }),
        (e: unknown) => e instanceof SettingsError && e.message.includes('CALL_BUDGET_LINE_HOLD_MS'),
      );
  });
});
