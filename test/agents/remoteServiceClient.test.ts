import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startRemoteService, type RunningRemoteService } from '../../local/remoteServices/index.js';
import { resetCircuitBreakers } from '../../shared/agents/circuitBreakers.js';
import {
  callRemoteService,
  type RemoteCallPolicyOptions,
  type RemoteCallRequest,
} from '../../shared/agents/remoteServiceClient.js';
import { newOrderId, order, post, waitFor } from '../remoteServices/fixtures.js';

// The Agent's client against a real demo payment service over loopback.
describe('callRemoteService', () => {
  let payment: RunningRemoteService;
  const fast: Partial<RemoteCallPolicyOptions> = {
    initialDelayMs: 20,
    maxDelayMs: 200,
    attemptTimeoutMs: 2_000,
    breakerThreshold: 50,
  };

  before(async () => {
    payment = await startRemoteService({ name: 'payment' });
  });
  after(async () => {
    await payment.stop();
  });
  beforeEach(async () => {
    resetCircuitBreakers();
    await post(payment.url, '_admin/reset', {});
  });

  const charge = (
    id: string,
    skus: string[] = [],
    extra: Partial<RemoteCallRequest> = {},
  ): RemoteCallRequest => ({
    baseUrl: payment.url,
    operation: 'charge',
    body: order(id, skus),
    idempotencyKey: `${id}:payment`,
    completeBy: new Date(Date.now() + 20_000),
    ...extra,
  });
  const requestsFor = (key: string) => payment.ledger().requests.filter((r) => r.idempotencyKey === key);

  test('a healthy call succeeds on the first attempt', async () => {
    const id = newOrderId();
    const result = await callRemoteService(charge(id), fast);
    assert.equal(result.outcome, 'succeeded');
    assert.ok(result.outcome === 'succeeded');
    assert.equal(result.status, 200);
    assert.equal(result.attempts, 1);
    assert.equal((result.body as { amount: number }).amount, 25);
    assert.equal(payment.ledger().counts.effects, 1);
  });

  test('two 503s are absorbed, every attempt carrying the same Idempotency-Key', async () => {
    const id = newOrderId();
    const result = await callRemoteService(charge(id, ['FAULT:payment:transient:2']), fast);
    assert.equal(result.outcome, 'succeeded');
    assert.equal(result.attempts, 3);
    const requests = requestsFor(`${id}:payment`);
    assert.deepEqual(
      requests.map((r) => [r.attempt, r.status]),
      [
        [1, 503],
        [2, 503],
        [3, 200],
      ],
    );
    // Every request the service saw for this order carried the one key.
    assert.equal(payment.ledger().counts.requests, 3);
    assert.equal(payment.ledger().counts.effects, 1);
  });

  test('a lost reply is retried and the service absorbs the repeat: one charge', async () => {
    const id = newOrderId();
    const result = await callRemoteService(charge(id, ['FAULT:payment:lost-reply']), fast);
    assert.equal(result.outcome, 'succeeded');
    assert.equal(result.attempts, 2);
    const ledger = payment.ledger();
    assert.equal(ledger.counts.effects, 1);
    assert.equal(ledger.counts.duplicatesAbsorbed, 1);
  });

  test('429 waits at least the Retry-After before the next attempt', async () => {
    const id = newOrderId();
    const starts: Date[] = [];
    const result = await callRemoteService(
      charge(id, ['FAULT:payment:throttle:1'], { onAttempt: (a) => starts.push(a.startedAt) }),
      fast,
    );
    assert.equal(result.outcome, 'succeeded');
    assert.equal(result.attempts, 2);
    // A lower bound only: the service asked for 1 s, and back-off alone is at most 200 ms here.
    assert.ok(starts[1].getTime() - starts[0].getTime() >= 950, 'retried before Retry-After');
  });

  test('a Retry-After that does not fit before complete-by stops the call silently', async () => {
    const id = newOrderId();
    const result = await callRemoteService(
      charge(id, ['FAULT:payment:throttle:1'], { completeBy: new Date(Date.now() + 600) }),
      fast,
    );
    assert.equal(result.outcome, 'deadline-passed');
    assert.ok(result.outcome === 'deadline-passed');
    assert.equal(result.reason, 'retry-after-beyond-deadline');
    assert.equal(result.attempts, 1);
    assert.equal(requestsFor(`${id}:payment`).length, 1);
  });

  test('a permanent 422 is not retried and carries the problem detail', async () => {
    const id = newOrderId();
    const result = await callRemoteService(charge(id, ['FAULT:payment:permanent']), fast);
    assert.equal(result.outcome, 'failed-permanently');
    assert.ok(result.outcome === 'failed-permanently');
    assert.equal(result.status, 422);
    assert.equal(result.attempts, 1);
    // The status travels beside the text, so the text does not repeat it.
    assert.match(result.error, /^Cannot do this, ever/);
    assert.equal(requestsFor(`${id}:payment`).length, 1);
    assert.equal(payment.ledger().counts.effects, 0);
  });

  test('a 409 from a tombstone is permanent too', async () => {
    const id = newOrderId();
    await post(
      payment.url,
      'refund',
      { ...order(id), originalIdempotencyKey: `${id}:payment` },
      { 'Idempotency-Key': `${id}:payment:compensate` },
    );
    const result = await callRemoteService(charge(id), fast);
    assert.equal(result.outcome, 'failed-permanently');
    assert.ok(result.outcome === 'failed-permanently');
    assert.equal(result.status, 409);
    assert.equal(payment.ledger().counts.effects, 0);
  });

  test('a hang past complete-by ends deadline-passed, and nothing is sent after the deadline', async () => {
    const id = newOrderId();
    const key = `${id}:payment`;
    const completeBy = new Date(Date.now() + 1_500);
    const starts: Date[] = [];
    const result = await callRemoteService(
      charge(id, ['FAULT:payment:hang:1000'], { completeBy, onAttempt: (a) => starts.push(a.startedAt) }),
      { ...fast, attemptTimeoutMs: 400 },
    );
    assert.equal(result.outcome, 'deadline-passed');
    assert.ok(result.outcome === 'deadline-passed');
    assert.equal(result.reason, 'deadline');
    assert.ok(
      result.attempts >= 2,
      `the per-attempt timeout should allow several attempts, got ${result.attempts}`,
    );
    assert.match(result.lastError ?? '', /timed out/);
    for (const start of starts) assert.ok(start < completeBy, 'an attempt started after complete-by');
    // The client has returned; give any straggling retry time to show itself, then check none did.
    const seen = requestsFor(key).length;
    assert.equal(seen, result.attempts);
    await new Promise((r) => setTimeout(r, 700));
    assert.equal(requestsFor(key).length, seen);
    await waitFor(
      () => requestsFor(key).every((r) => r.outcome === 'hung until the client gave up'),
      'sockets closed',
    );
    assert.equal(payment.ledger().counts.effects, 0);
  });

  test('the deadline cuts off an attempt in flight even when the attempt timeout is longer', async () => {
    const id = newOrderId();
    const completeBy = new Date(Date.now() + 700);
    const result = await callRemoteService(charge(id, ['FAULT:payment:hang:1000'], { completeBy }), {
      ...fast,
      attemptTimeoutMs: 60_000,
    });
    assert.equal(result.outcome, 'deadline-passed');
    assert.equal(result.attempts, 1);
    assert.ok(Date.now() >= completeBy.getTime());
    await waitFor(() => requestsFor(`${id}:payment`)[0]?.status === null, 'the held request to be dropped');
  });

  test('a complete-by already in the past sends nothing', async () => {
    const id = newOrderId();
    const result = await callRemoteService(charge(id, [], { completeBy: new Date(Date.now() - 1) }), fast);
    assert.deepEqual(result, { outcome: 'deadline-passed', reason: 'deadline', attempts: 0 });
    assert.equal(payment.ledger().counts.requests, 0);
  });

  test("the caller's abort signal stops the call and any further attempt", async () => {
    const id = newOrderId();
    const key = `${id}:payment`;
    const controller = new AbortController();
    const pending = callRemoteService(
      charge(id, ['FAULT:payment:hang:1000'], { signal: controller.signal }),
      {
        ...fast,
        attemptTimeoutMs: 60_000,
      },
    );
    await waitFor(() => requestsFor(key).length === 1, 'the first attempt to arrive');
    controller.abort();
    const result = await pending;
    assert.equal(result.outcome, 'deadline-passed');
    assert.ok(result.outcome === 'deadline-passed');
    assert.equal(result.reason, 'aborted');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(requestsFor(key).length, 1);
  });

  test('transient failures that outlast the attempt budget stop silently, not as a permanent failure', async () => {
    const id = newOrderId();
    const result = await callRemoteService(charge(id, ['FAULT:payment:transient:100']), {
      ...fast,
      maxAttempts: 3,
    });
    assert.equal(result.outcome, 'deadline-passed');
    assert.ok(result.outcome === 'deadline-passed');
    assert.equal(result.reason, 'retries-exhausted');
    assert.equal(result.attempts, 3);
    assert.equal(result.lastStatus, 503);
    assert.ok(result.lastError && !/^503/.test(result.lastError), result.lastError);
    assert.equal(requestsFor(`${id}:payment`).length, 3);
  });

  test('a refused connection is transient', async () => {
    const gone = await startRemoteService({ name: 'payment' });
    await gone.stop();
    const result = await callRemoteService(
      { ...charge(newOrderId()), baseUrl: gone.url },
      { ...fast, maxAttempts: 2 },
    );
    assert.equal(result.outcome, 'deadline-passed');
    assert.ok(result.outcome === 'deadline-passed');
    assert.equal(result.reason, 'retries-exhausted');
    assert.equal(result.attempts, 2);
    assert.match(result.lastError ?? '', /network error/);
  });

  test('bad arguments are rejected before anything is sent', async () => {
    await assert.rejects(
      callRemoteService(charge(newOrderId(), [], { completeBy: new Date('nope') }), fast),
      TypeError,
    );
    await assert.rejects(
      callRemoteService(charge(newOrderId(), [], { idempotencyKey: '' }), fast),
      TypeError,
    );
    await assert.rejects(callRemoteService(charge(newOrderId()), { maxAttempts: 0 }), RangeError);
    assert.equal(payment.ledger().counts.requests, 0);
  });
});
