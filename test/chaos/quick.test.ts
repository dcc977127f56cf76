import { test } from 'node:test';
import assert from 'node:assert/strict';
import { main } from '../../chaos/run.js';

/**
 * The quick chaos run (the `quick: true` scenarios, 12 orders each) against real local stacks:
 * every invariant of DESIGN.md must hold. The rows go to the test log.
 */
test('quick chaos run: every invariant holds', { timeout: 15 * 60_000 }, async () => {
  const report = await main({ quick: true, out: (line) => process.stdout.write(`${line}\n`) });
  assert.ok(report.rows.length >= 7, `scenarios that ran: ${report.rows.map((r) => r.scenario).join(', ')}`);
  // The run's own lines name each order that is not terminal (and in which state), so a failure
  // here says which order and why, not only how many.
  for (const row of report.rows)
    assert.equal(
      row.result.terminal,
      row.result.orders,
      `${row.scenario}: all terminal\n${report.lines.join('\n')}`,
    );
  assert.equal(report.lines.at(-1), 'violations: 0', report.lines.join('\n'));
  assert.equal(report.violations, 0);
});
