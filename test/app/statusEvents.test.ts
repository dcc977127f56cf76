import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Long from 'long';
import { HttpRequest } from '@azure/functions';
import { submitOrder } from '../../shared/http/orderApi.js';
import { handleSchedulerMessage } from '../../shared/scheduler/scheduler.js';
import type { StatusEventLevel } from '../../shared/domain/statusEvents.js';
import { topics } from '../../shared/messaging/entities.js';
import {
  context,
  freshDeps,
  load,
  processOrder,
  reply,
  startInfra,
  submitted,
  writeOnly,
  type Infra,
  type TestDeps,
} from './direct.js';
import { orderBody } from './helpers.js';

/**
 * The level of the order-status topic (STATUS_EVENTS): process-level events always, step-level
 * events (step-completed, a step's failure) only when asked for, so a deployment pays for one
 * send per step only when someone listens. The Scheduler runs directly against Azurite and the
 * emulator; what reached the topic is read back from its subscription.
 */
describe('Status events per level', () => {
  let infra: Infra;
  before(async () => {
    infra = await startInfra();
  });
  after(async () => {
    await infra?.stop();
  });

  const deliver = (deps: TestDeps, body: unknown) => handleSchedulerMessage(deps, body, context('scheduler'));

  async function published(orderId: string): Promise<string[]> {
    const receiver = infra.client.createReceiver(topics.orderStatus, 'all');
    try {
      const events = await receiver.peekMessages(1000, { fromSequenceNumber: Long.fromNumber(0) });
      return events
        .filter((m) => m.correlationId === orderId)
        .map((m) => `${m.body.event}${m.body.step ? `:${m.body.step}` : ''}`);
    } finally {
      await receiver.close();
    }
  }

  async function depsAt(level: StatusEventLevel | undefined): Promise<TestDeps> {
    const deps = await freshDeps(infra);
    return level === undefined ? deps : { ...deps, statusEvents: level };
  }

  async function succeed(deps: TestDeps): Promise<string> {
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    for (const step of ['inventory', 'payment', 'shipping']) {
      deps.clock.advanceSeconds(1);
      await deliver(deps, reply(orderId, step, 1, 'succeeded'));
    }
    return orderId;
  }

  /** A whole order from its POST (which publishes `received`) to Processed. */
  async function submitAndSucceed(deps: TestDeps): Promise<string> {
    const res = await submitOrder(
      deps,
      new HttpRequest({
        method: 'POST',
        url: 'http://127.0.0.1/api/orders',
        headers: { 'content-type': 'application/json' },
        body: { string: JSON.stringify(orderBody()) },
      }),
      context('submitOrder'),
    );
    assert.equal(res.status, 202);
    const orderId = (res.jsonBody as { orderId: string }).orderId;
    await deliver(deps, processOrder(orderId));
    for (const step of ['inventory', 'payment', 'shipping']) {
      deps.clock.advanceSeconds(1);
      await deliver(deps, reply(orderId, step, 1, 'succeeded'));
    }
    return orderId;
  }

  async function compensate(deps: TestDeps): Promise<string> {
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    deps.clock.advanceSeconds(1);
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));
    deps.clock.advanceSeconds(1);
    await deliver(deps, reply(orderId, 'payment', 1, 'failed'));
    deps.clock.advanceSeconds(1);
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded', 'compensate'));
    return orderId;
  }

  it('process level (the default): a successful order publishes processed and no step events', async () => {
    const orderId = await succeed(await depsAt(undefined));
    assert.deepEqual(await published(orderId), ['processed']);
  });

  it('process level (the default): a whole order from its POST publishes received and processed', async () => {
    const orderId = await submitAndSucceed(await depsAt(undefined));
    assert.deepEqual(await published(orderId), ['received', 'processed']);
  });

  it('none level: a whole order from its POST to Processed sends nothing to the topic', async () => {
    const deps = await depsAt('none');
    const orderId = await submitAndSucceed(deps);
    assert.equal((await load(deps, orderId)).state.processState, 'Processed');
    assert.deepEqual(await published(orderId), []);
  });

  it('none level: a compensated order sends nothing to the topic either', async () => {
    const deps = await depsAt('none');
    const orderId = await compensate(deps);
    assert.equal((await load(deps, orderId)).state.processState, 'Compensated');
    assert.deepEqual(await published(orderId), []);
  });

  it('step level: each completed step publishes its event before processed', async () => {
    const orderId = await succeed(await depsAt('step'));
    assert.deepEqual(await published(orderId), [
      'step-completed:inventory',
      'step-completed:payment',
      'step-completed:shipping',
      'processed',
    ]);
  });

  it('process level: a compensated order publishes compensating and compensated, not the failed step', async () => {
    const orderId = await compensate(await depsAt('process'));
    assert.deepEqual(await published(orderId), ['compensating', 'compensated']);
  });

  it('step level: a compensated order also names the completed and the failed step', async () => {
    const orderId = await compensate(await depsAt('step'));
    assert.deepEqual(await published(orderId), [
      'step-completed:inventory',
      'failed:payment',
      'compensating',
      'compensated',
    ]);
  });

  it('process level: healing after a crash does not publish the step event either', async () => {
    const deps = await depsAt('process');
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    // The process died after writing the step's completion: the redelivered reply re-sends what
    // the state implies, which at this level is the next request only.
    await writeOnly(deps, orderId, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 });
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));
    assert.deepEqual(await published(orderId), []);
  });
});
