import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { startRemoteService, type RunningRemoteService } from '../../local/remoteServices/index.js';
import { handleAgentRequest } from '../../shared/agents/agent.js';
import { resetCircuitBreakers } from '../../shared/agents/circuitBreakers.js';
import { orderRefusals, systemClock } from '../../shared/domain/index.js';
import type { AgentRequestMessage } from '../../shared/messaging/contracts.js';
import { queues } from '../../shared/messaging/entities.js';
import { context, held, paymentRequest, startInfra, type Infra } from '../app/direct.js';

/**
 * What the Agent tells the Scheduler for each kind of answer, against a real demo payment service
 * and the real broker: only a declared business refusal is a `failed` reply (which compensates);
 * credentials, routes, throttling and 5xx are a `stalled` reply sent before complete-by.
 */
describe('the Agent classifies remote answers', () => {
  let infra: Infra;
  let payment: RunningRemoteService;
  const fast = { initialDelayMs: 20, maxDelayMs: 100, attemptTimeoutMs: 2_000, breakerThreshold: 1_000 };

  before(async () => {
    infra = await startInfra();
    payment = await startRemoteService({ name: 'payment' });
  });
  after(async () => {
    await payment?.stop();
    await infra?.stop();
  });
  beforeEach(() => {
    resetCircuitBreakers();
    payment.setFaults({});
  });

  function request(skus: string[] = ['SKU-1'], windowMs = 4_000): AgentRequestMessage {
    return paymentRequest(windowMs, skus);
  }

  async function run(
    body: AgentRequestMessage,
    serviceUrl = payment.url,
    callPolicy: Record<string, number> = fast,
  ) {
    await handleAgentRequest(
      { bus: infra.bus, clock: systemClock, serviceUrl, callPolicy, refusals: orderRefusals.payment },
      queues.paymentAgent,
      body,
      context('paymentAgent'),
    );
    const finishedAt = Date.now();
    const replies = await held(infra, queues.scheduler, body.orderId);
    return { replies, finishedAt, completeBy: Date.parse(body.completeBy) };
  }

  it('a revoked credential (401) is a stalled reply naming the status, not a refusal', async () => {
    payment.setFaults({ answerStatus: 401 });
    const { replies, finishedAt, completeBy } = await run(request());
    assert.equal(replies.length, 1);
    assert.equal(replies[0].body.outcome, 'stalled');
    assert.equal(replies[0].body.error.status, 401);
    assert.ok(finishedAt < completeBy, 'replied before complete-by');
  });

  it('403 and a wrong route (404) stall too', async () => {
    payment.setFaults({ answerStatus: 403 });
    const forbidden = await run(request());
    assert.deepEqual(
      forbidden.replies.map((m) => [m.body.outcome, m.body.error?.status]),
      [['stalled', 403]],
    );
    payment.setFaults({});
    const wrongRoute = await run(request(), `${payment.url}/v2`);
    assert.deepEqual(
      wrongRoute.replies.map((m) => [m.body.outcome, m.body.error?.status]),
      [['stalled', 404]],
    );
  });

  it('5xx until the attempt budget is spent is a stalled reply before complete-by, not silence', async () => {
    payment.setFaults({ transientRate: 1 });
    const { replies, finishedAt, completeBy } = await run(request(), payment.url, {
      ...fast,
      maxAttempts: 3,
    });
    assert.deepEqual(
      replies.map((m) => [m.body.outcome, m.body.error?.status]),
      [['stalled', 503]],
    );
    assert.ok(finishedAt < completeBy);
  });

  it('5xx until complete-by draws near is a stalled reply sent before complete-by', async () => {
    payment.setFaults({ transientRate: 1 });
    const { replies, finishedAt, completeBy } = await run(request(), payment.url, {
      ...fast,
      maxAttempts: 1_000,
    });
    assert.deepEqual(
      replies.map((m) => m.body.outcome),
      ['stalled'],
    );
    assert.ok(finishedAt < completeBy);
  });

  it('a declared business refusal (422) is a failed reply', async () => {
    const { replies } = await run(request(['FAULT:payment:permanent']));
    assert.deepEqual(
      replies.map((m) => [m.body.outcome, m.body.error?.status]),
      [['failed', 422]],
    );
  });

  it('a tombstone (409 tombstoned) is a failed reply; a key conflict (409, undeclared) stalls', async () => {
    const body = request();
    // Undo first: the service records a tombstone and refuses the late action.
    const undo = await fetch(`${payment.url}/refund`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `${body.idempotencyKey}:compensate` },
      body: JSON.stringify({ ...body.payload, originalIdempotencyKey: body.idempotencyKey }),
    });
    assert.equal(undo.status, 200);
    const tomb = await run(body);
    assert.deepEqual(
      tomb.replies.map((m) => [m.body.outcome, m.body.error?.status]),
      [['failed', 409]],
    );
    // The same key for another order: the service's key-conflict 409 is not a business "no".
    const other = request();
    other.idempotencyKey = (await run(request())).replies[0].body.orderId + ':payment';
    const conflict = await run(other);
    assert.deepEqual(
      conflict.replies.map((m) => [m.body.outcome, m.body.error?.status]),
      [['stalled', 409]],
    );
  });
});
