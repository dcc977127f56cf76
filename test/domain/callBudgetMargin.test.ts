import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  admit,
  newDesk,
  newPacer,
  offer,
  pumpLine,
  release,
  type LineOptions,
  type PacingOptions,
} from '../../shared/domain/index.js';

/**
 * The service counts a start when the request reaches it, the gate when it decides: between the
 * two lie the process's event loop (a held start's timer fires late on a busy host) and the
 * network (bench, 4 hosts on 2 cores: 10 ms median, 42 ms p95, 71 ms at most). Starts exactly one
 * window apart at the gate then land inside one window at the service (bench: 6 in a 1 s window
 * at a limit of 5, by the gate's own decision times too). The pacer keeps a margin: its window is
 * 1 s plus the margin.
 */
const options: PacingOptions = {
  customerShare: 0.5,
  callMs: 200,
  leaseMs: 5_000,
  horizonMs: 10_000,
  maxHoldMs: 50,
};
const marginMs = 60;

function busiest(times: number[], windowMs = 1_000): number {
  const s = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < s.length; i++) {
    while (s[i] - s[j] >= windowMs) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

describe('call budget: the pacing margin for the way to the service', () => {
  it('starts one window plus the margin apart: the next start after a full window waits the margin', () => {
    const p = Object.assign(newPacer(), { rate: 3, concurrency: 10, marginMs });
    for (const t of [0, 300, 600])
      assert.equal(admit(p, { customer: 'x', waited: false }, t, options).kind, 'start');
    const early = admit(p, { customer: 'x', waited: true }, 1_000, { ...options, maxHoldMs: 0 });
    assert.ok(early.kind === 'wait' && early.at >= 1_000 + marginMs, JSON.stringify(early));
    assert.deepEqual(admit(p, { customer: 'x', waited: true }, 1_000 + marginMs, options), { kind: 'start' });
  });

  it('whatever the arrivals and the delays up to the margin, no 1 s window at the service holds more than the grant', () => {
    const step = fc.record({
      dt: fc.integer({ min: 0, max: 400 }),
      waited: fc.boolean(),
      end: fc.boolean(),
      lag: fc.integer({ min: 0, max: marginMs }),
    });
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.array(step, { maxLength: 150 }), (rate, steps) => {
        const p = Object.assign(newPacer(), { rate, concurrency: 4, marginMs });
        const atService: number[] = [];
        let now = 0;
        for (const s of steps) {
          now += s.dt;
          if (s.end) release(p);
          const a = admit(p, { customer: 'x', waited: s.waited }, now, options);
          if (a.kind === 'start') atService.push(now + (a.delayMs ?? 0) + s.lag);
        }
        assert.ok(busiest(atService) <= rate, `${busiest(atService)} in a window at ${rate}/s`);
      }),
    );
  });

  it('the line keeps the margin too: requests held in place start one window plus the margin apart', () => {
    const d = newDesk();
    Object.assign(d.pacer, { rate: 2, concurrency: 4, marginMs });
    const o: LineOptions = { ...options, holdMs: 1_000 };
    const started: number[] = [];
    for (let i = 0; i < 2; i++) {
      const r = offer(d, { key: `k${i}`, customer: `c${i}`, since: i, waited: true }, 0, o);
      if (r.decision.kind === 'start') started.push(0);
    }
    const held = offer(d, { key: 'k2', customer: 'c2', since: 2, waited: true }, 10, o);
    assert.equal(held.decision.kind, 'hold');
    const first = pumpLine(d, 10, o);
    assert.equal(first.start.length, 0);
    assert.equal(
      first.wakeAt,
      1_000 + marginMs,
      'the held request is due one window plus the margin after the first start',
    );
    assert.equal(pumpLine(d, 1_000, o).start.length, 0, 'not at one window sharp');
    assert.equal(pumpLine(d, 1_000 + marginMs, o).start.length, 1);
    assert.deepEqual(started, [0, 0]);
  });
});
