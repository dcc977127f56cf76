import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { CustomerIntake, orderIdFromIdempotencyKey, systemClock } from '../../shared/domain/index.js';
import { SubmissionLine } from '../../shared/http/submissionLine.js';
import { queues } from '../../shared/messaging/entities.js';
import type { Dependencies } from '../../shared/app/ports.js';
import { freshDeps, held, postOrder, startInfra, testPolicy, type Infra } from './direct.js';
import { orderBody } from './helpers.js';

/**
 * Each customer's turn at the intake (CUSTOMER_INTAKE_PER_SECOND), against Azurite and the
 * emulator: a customer's burst is recorded at once and its claims are scheduled one turn apart,
 * while another customer's order goes to the Scheduler at once. No Scheduler runs here; the test
 * reads the scheduler queue itself. The deps run on the system clock: the emulator schedules by it.
 */
describe("customer intake: one customer's burst does not go ahead of everyone else's orders", () => {
  let infra: Infra;
  before(async () => {
    infra = await startInfra();
  });
  after(async () => {
    await infra?.stop();
  });

  async function paced(perSecond: number, maxDelaySeconds = 60): Promise<Dependencies> {
    return {
      ...(await freshDeps(infra)),
      clock: systemClock,
      customerIntake: { book: new CustomerIntake(perSecond), maxDelaySeconds },
    };
  }

  const post = (deps: Dependencies, customer: string, key = randomUUID()) =>
    postOrder(deps, key, orderBody(['SKU-1'], customer));

  /** The claims of `ids` the scheduler queue hands out within `ms` (taken off the queue). */
  async function claimsWithin(ids: string[], ms: number): Promise<Set<string>> {
    const receiver = infra.client.createReceiver(queues.scheduler, { receiveMode: 'receiveAndDelete' });
    const got = new Set<string>();
    const until = Date.now() + ms;
    try {
      while (Date.now() < until) {
        const batch = await receiver.receiveMessages(50, {
          maxWaitTimeInMs: Math.max(50, until - Date.now()),
        });
        for (const m of batch) if (ids.includes(String(m.correlationId))) got.add(String(m.correlationId));
      }
    } finally {
      await receiver.close();
    }
    return got;
  }

  it("records a burst at once, schedules its claims a turn apart, and lets another customer's order go first", async () => {
    const deps = await paced(2);
    const burst: string[] = [];
    for (let i = 0; i < 5; i++) {
      const key = randomUUID();
      assert.equal((await post(deps, 'burst', key)).status, 202);
      burst.push(orderIdFromIdempotencyKey(key));
    }
    const otherKey = randomUUID();
    assert.equal((await post(deps, 'other', otherKey)).status, 202);
    const other = orderIdFromIdempotencyKey(otherKey);

    const states = await Promise.all(burst.map(async (id) => (await deps.store.load(id))!.state));
    // Turns from the first submission: two at once (a 2/s rate's burst), then 500 ms apart.
    const first = states[0].createdAt.getTime();
    const turns = states.map((s) => s.scheduledFor!.getTime() - first);
    assert.ok(states[1].createdAt.getTime() - first < 500, 'the submissions came within one spacing');
    assert.deepEqual(turns.slice(2), [500, 1_000, 1_500], `turns ${turns.join(', ')} ms`);
    assert.equal(states[1].scheduledFor!.getTime(), states[1].createdAt.getTime(), 'the second goes at once');
    for (const s of states) {
      assert.equal(s.processState, 'Pending', 'every order of the burst is recorded at once');
      assert.equal(
        s.completeBy!.getTime(),
        s.scheduledFor!.getTime() + testPolicy.claimTimeoutSeconds * 1000,
        'the claim timeout runs from the turn',
      );
    }
    const otherState = (await deps.store.load(other))!.state;
    assert.equal(
      otherState.scheduledFor!.getTime(),
      otherState.createdAt.getTime(),
      'the other customer is not held',
    );

    // At once: the burst's first two and the other customer's; the rest later, by their turns.
    // Claims are scheduled in whole seconds: the third's and fourth's a second after submission.
    const early = await claimsWithin([...burst, other], Math.max(200, first + 800 - Date.now()));
    assert.ok(early.has(other), "the other customer's claim is there at once");
    assert.ok(early.has(burst[0]) && early.has(burst[1]));
    assert.ok(!early.has(burst[3]) && !early.has(burst[4]), `held back: ${[...early].length} claims early`);
    const later = await claimsWithin(
      burst.filter((id) => !early.has(id)),
      4_000,
    );
    assert.equal(early.size + later.size, 6, 'every claim arrives, none twice');
  });

  it('refuses with 429 problem+json and Retry-After, writing nothing, an order whose turn is past the limit', async () => {
    const deps = await paced(1, 2);
    for (let i = 0; i < 3; i++) assert.equal((await post(deps, 'eager')).status, 202);
    const key = randomUUID();
    const res = await post(deps, 'eager', key);
    assert.equal(res.status, 429);
    const headers = res.headers as Record<string, string>;
    assert.equal(headers['Content-Type'], 'application/problem+json');
    assert.ok(Number(headers['Retry-After']) >= 1, `Retry-After ${headers['Retry-After']}`);
    const body = JSON.parse(String(res.body)) as { type: string; status: number; detail: string };
    assert.match(body.type, /overloaded$/);
    assert.equal(body.status, 429);
    const orderId = orderIdFromIdempotencyKey(key);
    assert.equal(await deps.store.load(orderId), null);
    assert.equal((await held(infra, queues.scheduler, orderId)).length, 0);
    assert.equal((await post(deps, 'someone-else')).status, 202, 'another customer is taken');
  });

  it('a repeated submission answers from the record and books no second turn', async () => {
    const deps = await paced(1, 60);
    const key = randomUUID();
    assert.equal((await post(deps, 'repeat', key)).status, 202);
    assert.equal((await post(deps, 'repeat', key)).status, 202);
    const next = randomUUID();
    assert.equal((await post(deps, 'repeat', next)).status, 202);
    const s = (await deps.store.load(orderIdFromIdempotencyKey(next)))!.state;
    const turn = s.scheduledFor!.getTime() - s.createdAt.getTime();
    assert.ok(turn > 500 && turn <= 1_000, `the second order's turn is one spacing out: ${turn} ms`);
  });

  it("another customer's submission is answered before a burst's, which waits in its own line", async () => {
    const deps: Dependencies = { ...(await freshDeps(infra)), submissionLine: new SubmissionLine(2, 100) };
    const answered: string[] = [];
    const burst = Array.from({ length: 40 }, (_, i) =>
      post(deps, 'burst').then((r) => {
        answered.push(`burst-${i}`);
        return r.status;
      }),
    );
    const other = post(deps, 'other').then((r) => {
      answered.push('other');
      return r.status;
    });
    assert.deepEqual(new Set(await Promise.all([...burst, other])), new Set([202]), 'every order is taken');
    const place = answered.indexOf('other');
    assert.ok(place < 10, `the other customer's 202 came ${place + 1}th of 41`);
  });

  it('a burst past its line gets 429 problem+json with Retry-After, nothing recorded', async () => {
    const deps: Dependencies = { ...(await freshDeps(infra)), submissionLine: new SubmissionLine(1, 2) };
    const keys = Array.from({ length: 6 }, () => randomUUID());
    const answers = await Promise.all(keys.map((key) => post(deps, 'eager', key)));
    const refused = answers.flatMap((r, i) => (r.status === 429 ? [i] : []));
    assert.equal(
      refused.length,
      3,
      `one in progress, two waiting, three refused: ${answers.map((r) => r.status).join(', ')}`,
    );
    for (const i of refused) {
      const headers = answers[i].headers as Record<string, string>;
      assert.equal(headers['Content-Type'], 'application/problem+json');
      assert.equal(headers['Retry-After'], '1');
      assert.match(String(answers[i].body), /overloaded/);
      assert.equal(await deps.store.load(orderIdFromIdempotencyKey(keys[i])), null);
    }
    assert.equal(deps.submissionLine!.customers, 0, 'the line is empty afterwards');
  });

  it('a submission that loses the race for its key gives its turn back', async () => {
    const deps = await paced(1, 60);
    const key = randomUUID();
    // Both read no record and book a turn; one write wins, the other answers as a replay.
    const both = await Promise.all([post(deps, 'race', key), post(deps, 'race', key)]);
    assert.deepEqual(
      both.map((r) => r.status),
      [202, 202],
    );
    const next = randomUUID();
    assert.equal((await post(deps, 'race', next)).status, 202);
    const s = (await deps.store.load(orderIdFromIdempotencyKey(next)))!.state;
    const turn = s.scheduledFor!.getTime() - s.createdAt.getTime();
    assert.ok(turn > 500 && turn <= 1_000, `one order recorded, one turn booked: the next is ${turn} ms out`);
  });
});
