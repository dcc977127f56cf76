import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  newPacer,
  recordStart,
  restampStart,
  startableAt,
  waitingDueAt,
  waitingRecentMs,
  waitingSpacingMs,
} from '../../shared/domain/index.js';

/**
 * Pull mode (issue 26): requests that cannot get a call slot wait in the service's waiting queue,
 * due at a time this instance books, and a free slot claims its start before it reads the next.
 */
describe('waiting queue: when a request falls due', () => {
  const o = { spacingMs: 700, share: 0.25 };

  it("a customer's first request is due at once; its next ones one step apart on its own clock", () => {
    const book: Array<{ at: number; customer: string }> = [];
    const due = (c: string, now: number) => {
      const at = waitingDueAt(book, c, now, o);
      book.push({ at, customer: c });
      return at;
    };
    assert.equal(due('alone', 1_000), 1_000);
    assert.equal(due('alone', 1_010), 1_700);
    assert.equal(due('alone', 1_020), 2_400);
  });

  it('while it holds more than its share of what waits and others wait, its step widens to its share', () => {
    const book = [
      { at: 1_000, customer: 'burst' },
      { at: 1_700, customer: 'burst' },
      { at: 2_400, customer: 'burst' },
      { at: 1_100, customer: 'other' },
    ];
    // Another customer's request is due at once, before the burst's later ones.
    assert.equal(waitingDueAt(book, 'newcomer', 1_200, o), 1_200);
    const next = waitingDueAt(book, 'burst', 1_200, o);
    assert.equal(next, 2_400 + (700 * 1.1) / 0.25);
  });

  it('many customers with a request or two each: none is past its share, nothing is pushed back far', () => {
    const book = Array.from({ length: 20 }, (_, i) => ({ at: 1_000 + i, customer: `c${i}` }));
    assert.equal(waitingDueAt(book, 'c3', 1_050, o), 1_003 + 700);
  });

  it('bookings older than the recent window no longer count', () => {
    const book = [{ at: 1_000, customer: 'c' }];
    assert.equal(waitingDueAt(book, 'c', 1_000 + waitingRecentMs + 1, o), 1_000 + waitingRecentMs + 1);
  });

  it('share 1: no customer is held back for others', () => {
    const book = [
      { at: 1_000, customer: 'burst' },
      { at: 1_700, customer: 'burst' },
      { at: 1_100, customer: 'other' },
    ];
    assert.equal(waitingDueAt(book, 'burst', 1_200, { spacingMs: 700, share: 1 }), 2_400);
  });

  it('all instances together make requests due at 1.1 x the rate; undefined without a rate', () => {
    assert.equal(waitingSpacingMs(5, 4), 4_000 / 5.5);
    assert.equal(waitingSpacingMs(0, 4), undefined);
    assert.equal(waitingSpacingMs(Number.POSITIVE_INFINITY, 4), undefined);
  });

  it('a customer alone fills the rate: over any span its requests fall due at least at the rate', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 40 }), (instances, rate) => {
        const spacing = waitingSpacingMs(rate, instances)!;
        const book: Array<{ at: number; customer: string }> = [];
        let at = 0;
        for (let i = 0; i < 30; i++) {
          at = waitingDueAt(book, 'alone', 0, { spacingMs: spacing, share: 0.25 });
          book.push({ at, customer: 'alone' });
        }
        // 30 on one instance, the same on each of the others: due at instances x 30 / span.
        const perSecond = (instances * 29) / (at / 1000);
        return perSecond >= rate;
      }),
    );
  });
});

describe('waiting queue: a claimed slot', () => {
  it('a claim that read nothing gives its start and its slot back', () => {
    const p = newPacer();
    p.rate = 1;
    p.concurrency = 1;
    recordStart(p, 1_000);
    assert.equal(startableAt(p, 1_010), undefined, 'the slot is taken');
    restampStart(p, 1_000, undefined);
    assert.equal(p.inFlight, 0);
    assert.deepEqual(p.starts, []);
    assert.equal(startableAt(p, 1_010), 1_010);
  });

  it('a claim that read a request counts its start from when it is in hand', () => {
    const p = newPacer();
    p.rate = 2;
    p.concurrency = 2;
    recordStart(p, 1_000);
    restampStart(p, 1_000, 1_400);
    assert.deepEqual(p.starts, [1_400]);
    assert.equal(p.inFlight, 1);
  });

  it('moving a counted start later never lets a 1 s window hold more starts than the rate', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 0, max: 600 })), {
          minLength: 1,
          maxLength: 60,
        }),
        (rate, steps) => {
          const p = newPacer();
          p.rate = rate;
          p.concurrency = 1_000;
          let now = 0;
          const final: number[] = [];
          for (const [gap, late] of steps) {
            now += gap;
            if (startableAt(p, now) !== now) continue;
            recordStart(p, now);
            // The request is in hand `late` ms after the claim (a receive that waited for one).
            const inHand = now + late;
            restampStart(p, now, inHand);
            final.push(inHand);
            now = inHand;
          }
          final.sort((a, b) => a - b);
          return final.every((s) => final.filter((u) => u >= s && u < s + 1_000).length <= rate);
        },
      ),
    );
  });
});
