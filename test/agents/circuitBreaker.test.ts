import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startRemoteService, type RunningRemoteService } from '../../local/remoteServices/index.js';
import { circuitStatesFor, resetCircuitBreakers } from '../../shared/agents/circuitBreakers.js';
import { callRemoteService, type RemoteCallPolicyOptions } from '../../shared/agents/remoteServiceClient.js';
import { newOrderId, order } from '../remoteServices/fixtures.js';

let inventory: RunningRemoteService;
before(async () => {
  resetCircuitBreakers();
  inventory = await startRemoteService({ name: 'inventory' });
});
after(async () => {
  await inventory.stop();
});

const policy: Partial<RemoteCallPolicyOptions> = {
  maxAttempts: 2,
  initialDelayMs: 20,
  maxDelayMs: 100,
  attemptTimeoutMs: 2_000,
  breakerThreshold: 2,
  breakerHalfOpenAfterMs: 1_500,
};

const reserve = (id: string, skus: string[], msToDeadline: number) =>
  callRemoteService(
    {
      baseUrl: inventory.url,
      operation: 'reserve',
      body: order(id, skus),
      idempotencyKey: `${id}:inventory`,
      completeBy: new Date(Date.now() + msToDeadline),
    },
    policy,
  );

test('the circuit opens after consecutive failures, fails fast, and closes after a half-open probe', async () => {
  // Two consecutive 503s open the breaker shared by every call to this service.
  const failing = await reserve(newOrderId(), ['FAULT:inventory:transient:100'], 20_000);
  assert.equal(failing.outcome, 'deadline-passed');
  assert.equal(failing.attempts, 2);
  assert.deepEqual(circuitStatesFor(inventory.url), ['open']);

  // A healthy order now fails fast: nothing reaches the service before the (short) deadline.
  const requestsBefore = inventory.ledger().counts.requests;
  const blocked = newOrderId();
  const fastFail = await reserve(blocked, [], 300);
  assert.equal(fastFail.outcome, 'deadline-passed');
  assert.equal(fastFail.attempts, 0);
  assert.equal(inventory.ledger().counts.requests, requestsBefore);

  // With time to spare, the call waits for the half-open probe, which succeeds and closes the circuit.
  const patient = await reserve(newOrderId(), [], 20_000);
  assert.equal(patient.outcome, 'succeeded');
  assert.equal(patient.attempts, 1);
  assert.deepEqual(circuitStatesFor(inventory.url), ['closed']);
  assert.equal(inventory.ledger().counts.effects, 1);
});

test('a permanent 4xx does not count against the circuit', async () => {
  resetCircuitBreakers();
  for (let i = 0; i < 3; i++) {
    const result = await reserve(newOrderId(), ['FAULT:inventory:permanent'], 20_000);
    assert.equal(result.outcome, 'failed-permanently');
  }
  assert.deepEqual(circuitStatesFor(inventory.url), ['closed']);
});

test('a failed half-open probe reopens the circuit', async () => {
  resetCircuitBreakers();
  await reserve(newOrderId(), ['FAULT:inventory:transient:100'], 20_000);
  assert.deepEqual(circuitStatesFor(inventory.url), ['open']);
  // The probe itself fails (503) and the circuit opens again; the attempt budget then runs out.
  const probe = await reserve(newOrderId(), ['FAULT:inventory:transient:100'], 20_000);
  assert.equal(probe.outcome, 'deadline-passed');
  assert.deepEqual(circuitStatesFor(inventory.url), ['open']);
});

test('calls cut off by their own complete-by do not open the circuit', async () => {
  resetCircuitBreakers();
  // More hung calls in a row than the threshold, each ended by its deadline, not by the service.
  for (let i = 0; i < 3; i++) {
    const hung = await reserve(newOrderId(), ['FAULT:inventory:hang:1'], 300);
    assert.equal(hung.outcome, 'deadline-passed');
  }
  assert.deepEqual(circuitStatesFor(inventory.url), ['closed']);
  const healthy = await reserve(newOrderId(), [], 5_000);
  assert.equal(healthy.outcome, 'succeeded');
  assert.equal(healthy.attempts, 1);
});
