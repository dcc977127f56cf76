import { test } from 'node:test';
import assert from 'node:assert/strict';
import { main } from '../../chaos/run.js';
import { scenarios } from '../../chaos/scenarios.js';

/**
 * A scenario arranges its preconditions at any size it accepts, or refuses the size before
 * anything starts; a precondition it failed to arrange is reported as such, never as a product
 * violation. deploy-mid-flight at its smallest size, on a real local stack.
 */
const deployMidFlight = scenarios.find((s) => s.name === 'deploy-mid-flight')!;

test('deploy-mid-flight refuses a size it cannot set itself up with, before running anything', async () => {
  assert.ok(deployMidFlight.minOrders, 'it declares its smallest size');
  const lines: string[] = [];
  const started = Date.now();
  await assert.rejects(
    main({ only: ['deploy-mid-flight'], orders: deployMidFlight.minOrders - 1, out: (l) => lines.push(l) }),
    new RegExp(
      `deploy-mid-flight needs at least ${deployMidFlight.minOrders} orders.*got --orders ${deployMidFlight.minOrders - 1}.*nothing was run`,
    ),
  );
  assert.deepEqual(lines, [], 'no stack was started, no row printed');
  assert.ok(Date.now() - started < 2000);
});

test(
  'deploy-mid-flight at 12 orders places v1 orders at every spot and ends with no violation',
  { timeout: 10 * 60_000 },
  async () => {
    const report = await main({
      only: ['deploy-mid-flight'],
      orders: 12,
      out: (line) => process.stdout.write(`${line}\n`),
    });
    const row = report.rows[0];
    assert.ok(row, report.lines.join('\n'));
    assert.deepEqual(row.unmet, [], report.lines.join('\n'));
    assert.equal(report.inconclusive, 0);
    assert.equal(report.violations, 0, report.lines.join('\n'));
  },
);
