import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { handleSchedulerMessage } from '../../shared/scheduler/scheduler.js';
import { runSupervisor } from '../../shared/supervisor/supervisor.js';
import { randomUUID } from 'node:crypto';
import { defaultRepairSchedule, orderRefusals, processOrderMessageId } from '../../shared/domain/index.js';
import { handleAgentRequest } from '../../shared/agents/agent.js';
import { queues } from '../../shared/messaging/entities.js';
import { InFlightIndex, StateStore } from '../../shared/stateStore/index.js';
import { indexHas } from '../stateStore/harness.js';
import { ServiceBusQueueBacklog } from '../../shared/messaging/backlog.js';
import {
  context,
  freshDeps,
  held,
  load,
  processOrder,
  reply,
  startInfra,
  submitted,
  type Infra,
  writeOnly,
  type TestDeps,
} from './direct.js';

/**
 * The Supervisor called directly with a ManualClock (policy: step 60 s, soft threshold 2, hard
 * threshold 3, extended back-off 30 s): retry now, retry later, give up; and two Supervisors at once.
 */
describe('Supervisor: retry, back-off, give up, concurrent sweeps', () => {
  let infra: Infra;
  before(async () => {
    infra = await startInfra();
  });
  after(async () => {
    await infra?.stop();
  });

  const deliver = (deps: TestDeps, body: unknown, invocationId?: string) =>
    handleSchedulerMessage(deps, body, context('scheduler', invocationId));
  const sweep = (deps: TestDeps) => runSupervisor(deps, context('supervisor'));
  const processOrders = async (orderId: string) =>
    (await held(infra, queues.scheduler, orderId)).filter((m) => m.subject === 'process-order');

  it('nothing to do before complete-by', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    deps.clock.advanceSeconds(59);
    const report = await sweep(deps);
    assert.equal(report.candidates, 0);
    assert.equal((await load(deps, orderId)).state.processState, 'Processing');
  });

  it('below, between and at the thresholds: retry now, retry after the back-off, give up with an alert', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId), 'claim-1');
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));

    // 1st timeout (below the soft threshold): Pending, notified at once.
    deps.clock.advanceSeconds(61);
    let report = await sweep(deps);
    assert.deepEqual([report.candidates, report.retried, report.gaveUp], [1, 1, 0]);
    let { state } = await load(deps, orderId);
    assert.equal(state.processState, 'Pending');
    assert.equal(state.failureCount, 1);
    assert.equal(state.lockedBy, null);
    assert.equal(state.steps[1].status, 'TimedOut');
    assert.equal(state.scheduledFor?.getTime(), deps.clock.now().getTime());
    let notes = await processOrders(orderId);
    const retry = notes.find((m) => m.messageId === processOrderMessageId(orderId, 'retry', 1, 1));
    assert.ok(retry, notes.map((m) => m.messageId).join(','));
    assert.equal(retry.body.reason, 'retry');
    assert.equal(retry.scheduledEnqueueTimeUtc, undefined, 'not delayed');

    // The retry runs: attempt 2 of payment.
    await deliver(deps, processOrder(orderId, 'retry'), 'claim-2');
    ({ state } = await load(deps, orderId));
    assert.equal(state.steps[1].attempt, 2);

    // 2nd timeout (at the soft threshold, below the hard one): notified after the back-off.
    deps.clock.advanceSeconds(61);
    report = await sweep(deps);
    assert.equal(report.retried, 1);
    ({ state } = await load(deps, orderId));
    assert.equal(state.processState, 'Pending');
    assert.equal(state.failureCount, 2);
    const due = deps.clock.now().getTime() + 30_000;
    assert.equal(state.scheduledFor?.getTime(), due);
    notes = await processOrders(orderId);
    const later = notes.find((m) => m.messageId === processOrderMessageId(orderId, 'backoff-retry', 2, 1));
    assert.ok(later, notes.map((m) => m.messageId).join(','));
    assert.equal(later.scheduledEnqueueTimeUtc?.getTime(), due);

    // A process-order arriving early (a duplicate, say) does not jump the back-off.
    const before = await load(deps, orderId);
    await deliver(deps, processOrder(orderId, 'backoff-retry'), 'too-early');
    const unchanged = await load(deps, orderId);
    assert.deepEqual(unchanged.state, before.state);
    assert.deepEqual(unchanged.etags, before.etags);

    // The Supervisor leaves a backing-off order alone until its new complete-by.
    deps.clock.advanceSeconds(29);
    assert.equal((await sweep(deps)).candidates, 0);
    deps.clock.advanceSeconds(1);
    await deliver(deps, processOrder(orderId, 'backoff-retry'), 'claim-3');
    ({ state } = await load(deps, orderId));
    assert.equal(state.lockedBy, 'claim-3');
    assert.equal(state.steps[1].attempt, 3);

    // 3rd timeout (the hard threshold): Error path, alert, compensation of what completed.
    deps.clock.advanceSeconds(61);
    report = await sweep(deps);
    assert.deepEqual([report.retried, report.gaveUp], [0, 1]);
    ({ state } = await load(deps, orderId));
    assert.equal(state.processState, 'Compensating');
    assert.equal(state.errorCode, 'GaveUp');
    assert.equal(state.failureCount, 3);
    const alerts = await held(infra, queues.operatorAlerts, orderId);
    assert.equal(alerts.length, 1);
    assert.equal(alerts[0].body.orderId, orderId);
    assert.match(alerts[0].body.reason, /^GaveUp/);
    // The in-doubt payment is undone first (reverse order), then inventory.
    assert.deepEqual(
      state.steps.map((s) => s.status),
      ['Completed', 'Compensating', 'NotStarted'],
    );
    const undo = (await held(infra, queues.paymentAgent, orderId)).filter(
      (m) => m.subject === 'payment:compensate',
    );
    assert.equal(undo.length, 1);
    await deliver(deps, reply(orderId, 'payment', 1, 'succeeded', 'compensate'));
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded', 'compensate'));
    ({ state } = await load(deps, orderId));
    assert.equal(state.processState, 'Error');
    assert.equal((await held(infra, queues.operatorAlerts, orderId)).length, 1, 'still one alert');
    assert.equal((await sweep(deps)).candidates, 0, 'a terminal order leaves the sweep');
  });

  it('two Supervisors sweeping at once act once per order', async () => {
    const deps = await freshDeps(infra);
    const orderIds = await Promise.all([1, 2, 3, 4].map(() => submitted(deps)));
    for (const orderId of orderIds) await deliver(deps, processOrder(orderId));
    deps.clock.advanceSeconds(61);
    const [a, b] = await Promise.all([sweep(deps), sweep(deps)]);
    assert.equal(a.retried + b.retried, orderIds.length, JSON.stringify({ a, b }));
    assert.equal(a.failed + b.failed, 0);
    for (const orderId of orderIds) {
      const { state } = await load(deps, orderId);
      assert.equal(state.failureCount, 1, 'one timeout counted, not two');
      assert.equal(state.processState, 'Pending');
      assert.equal((await processOrders(orderId)).length, 1);
    }
  });

  it('the index reconcile pages through the table across runs, after the sweep, bounded per run', async () => {
    const deps = await freshDeps(infra);
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push(await submitted(deps));
    // Every index row lost (a deleted table, a bug): only the reconcile can bring them back.
    for (const id of ids) await deps.store.index.table.deleteEntity(InFlightIndex.partitionFor(id), id);
    const slice = { reconcilePageSize: 2, reconcilePagesPerRun: 2 };
    const first = await runSupervisor(deps, context('supervisor'), { reconcile: true, ...slice });
    assert.equal(first.reconciled, 4, 'one bounded slice per run');
    let total = first.reconciled ?? 0;
    // Later runs continue where the last one stopped (no new start), until the pass is through.
    for (let run = 0; run < 10 && total < ids.length; run++) {
      const r = await runSupervisor(deps, context('supervisor'), slice);
      assert.ok((r.reconciled ?? 0) <= 4);
      total += r.reconciled ?? 0;
    }
    assert.equal(total, ids.length);
    for (const id of ids) assert.equal(await indexHas(deps.store.index, id), true);
    // Through: a run without a new start reconciles nothing.
    assert.equal((await runSupervisor(deps, context('supervisor'), slice)).reconciled, undefined);
  });

  it('an idle sweep is one table request once it knows no reconcile pass is under way', async () => {
    const deps = await freshDeps(infra);
    await runSupervisor(deps, context('supervisor'));
    for (let run = 0; run < 3; run++) {
      deps.store.metrics.reset();
      const report = await runSupervisor(deps, context('supervisor'));
      assert.equal(report.reconciled, undefined);
      assert.deepEqual(deps.store.metrics.byMethod, { GET: 1 }, `run ${run}: the index query alone`);
    }
    // A pass started here is carried on by the next runs, and then they are idle again.
    await submitted(deps);
    const started = await runSupervisor(deps, context('supervisor'), {
      reconcile: true,
      reconcilePageSize: 1,
      reconcilePagesPerRun: 1,
    });
    assert.equal(started.reconciled, 0);
    let runs = 0;
    while ((await runSupervisor(deps, context('supervisor'))).reconciled !== undefined && runs < 10)
      runs += 1;
    deps.store.metrics.reset();
    await runSupervisor(deps, context('supervisor'));
    assert.deepEqual(deps.store.metrics.byMethod, { GET: 1 });
  });

  it('a full pass due while a long hourly pass runs replaces it, on a schedule that never lands on :00', async () => {
    const base = await freshDeps(infra);
    const suffix = randomUUID().replace(/-/g, '').slice(0, 10);
    const store = await StateStore.open(
      { kind: 'connectionString', connectionString: infra.azurite.connectionString },
      {
        ordersTable: `Orders${suffix}`,
        inFlightTable: `InFlight${suffix}`,
        stateIndexTable: `Index${suffix}`,
      },
    );
    const deps: TestDeps = { ...base, store };
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push(await submitted(deps));
    // The state index is lost: only a full pass rebuilds it.
    for await (const e of store.stateIndex.table.listEntities())
      await store.stateIndex.table.deleteEntity(e.partitionKey!, e.rowKey!);
    // Runs two days back (nothing overdue), every 20 minutes from :02; yesterday's full pass ran.
    const day = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 2 * 86_400_000;
    const at = (h: number, m: number) => new Date(day + (h * 60 + m) * 60_000);
    await store.index.repairs.save(null, { fullStartedAt: at(-21, 2), hourlyStartedAt: at(1, 2) });
    const slice = { repairs: defaultRepairSchedule, reconcilePageSize: 2, reconcilePagesPerRun: 1 };
    const runAt = (when: Date) => {
      deps.clock.set(when);
      return runSupervisor(deps, context('supervisor'), slice);
    };
    assert.equal((await runAt(at(2, 2))).repairStarted, 'hourly');
    const carried = await runAt(at(2, 22));
    assert.deepEqual(
      [carried.repairStarted, carried.reconciled],
      [undefined, 0],
      'the hourly pass spans runs',
    );
    await runAt(at(2, 42));
    assert.equal((await runAt(at(3, 2))).repairStarted, 'full', 'the full pass replaces the hourly one');
    // Then hourly passes again, once the full pass is through (it spans hours at one page a run).
    const later: Array<{ hour: number; pass: string }> = [];
    for (let m = 22; m < 14 * 60; m += 20) {
      const r = await runAt(at(3, m));
      if (r.repairStarted)
        later.push({ hour: Math.floor(deps.clock.now().getTime() / 3_600_000), pass: r.repairStarted });
    }
    assert.ok(later.length > 0, 'no pass after the full one');
    assert.ok(
      later.every((s) => s.pass === 'hourly'),
      JSON.stringify(later),
    );
    assert.equal(
      new Set(later.map((s) => s.hour)).size,
      later.length,
      `two passes in one hour: ${JSON.stringify(later)}`,
    );
    const listed = await store.listOrders({ state: 'Pending' }, undefined, 100);
    assert.deepEqual(
      new Set(listed.items.map((o) => o.orderId)),
      new Set(ids),
      'the full pass rebuilt the index',
    );
    const { record } = await store.index.repairs.read();
    assert.equal(record.fullStartedAt?.getTime(), at(3, 2).getTime(), 'one full pass that day');
  });

  it('a reply waiting behind a busy Scheduler is not a timeout: the sweep waits until the Scheduler caught up', async () => {
    const deps = await freshDeps(infra);
    // Only this test's messages on the scheduler queue (earlier tests leave theirs unconsumed).
    const purge = infra.client.createReceiver(queues.scheduler, { receiveMode: 'receiveAndDelete' });
    while ((await purge.receiveMessages(100, { maxWaitTimeInMs: 300 })).length > 0);
    await purge.close();
    const gated: TestDeps = {
      ...deps,
      schedulerBacklog: new ServiceBusQueueBacklog(infra.client, queues.scheduler),
    };
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId), 'claim-1');
    // The Agent answered in time; its reply waits in the scheduler queue behind a backlog.
    await deps.bus.send(queues.scheduler, [
      { messageId: `${orderId}:reply-in-time`, body: reply(orderId, 'inventory', 1, 'succeeded') },
    ]);
    deps.clock.advanceSeconds(61);
    const report = await runSupervisor(gated, context('supervisor'));
    assert.deepEqual([report.candidates, report.postponed, report.retried], [1, 1, 0]);
    // Still waiting a sweep later (each peek starts at the head again): still postponed.
    deps.clock.advanceSeconds(1);
    assert.equal((await runSupervisor(gated, context('supervisor'))).postponed, 1);
    let { state } = await load(deps, orderId);
    assert.deepEqual([state.processState, state.failureCount], ['Processing', 0]);
    // The Scheduler catches up and applies the reply: the order moves on, no failure counted.
    const scheduler = infra.client.createReceiver(queues.scheduler, { receiveMode: 'receiveAndDelete' });
    const [waiting] = await scheduler.receiveMessages(1, { maxWaitTimeInMs: 2000 });
    await scheduler.close();
    await deliver(deps, waiting.body, 'reply-applied');
    ({ state } = await load(deps, orderId));
    assert.deepEqual([state.steps[0].status, state.steps[1].status], ['Completed', 'Running']);
    // Nothing waits any more: a step that really runs out of time is a timeout again.
    deps.clock.advanceSeconds(61);
    const later = await runSupervisor(gated, context('supervisor'));
    assert.deepEqual([later.postponed, later.retried], [0, 1]);
    assert.equal((await load(deps, orderId)).state.failureCount, 1);
  });

  it('a scheduler queue nobody consumes postpones timeouts for a claim timeout, not forever', async () => {
    const deps = await freshDeps(infra);
    const purge = infra.client.createReceiver(queues.scheduler, { receiveMode: 'receiveAndDelete' });
    while ((await purge.receiveMessages(100, { maxWaitTimeInMs: 300 })).length > 0);
    await purge.close();
    const gated: TestDeps = {
      ...deps,
      schedulerBacklog: new ServiceBusQueueBacklog(infra.client, queues.scheduler),
    };
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId), 'claim-1');
    await deps.bus.send(queues.scheduler, [
      { messageId: `${orderId}:reply-stuck`, body: reply(orderId, 'inventory', 1, 'succeeded') },
    ]);
    deps.clock.advanceSeconds(61);
    assert.equal((await runSupervisor(gated, context('supervisor'))).postponed, 1);
    // The same message has waited at the head for longer than a claim timeout: no Scheduler runs.
    deps.clock.advanceSeconds(deps.policy.claimTimeoutSeconds + 1);
    const report = await runSupervisor(gated, context('supervisor'));
    assert.deepEqual([report.postponed, report.retried], [0, 1]);
    assert.equal((await load(deps, orderId)).state.failureCount, 1);
  });

  /** Empties the given queues so only this test's messages are peeked. */
  const purge = async (...entities: string[]) => {
    for (const entity of entities) {
      const r = infra.client.createReceiver(entity, { receiveMode: 'receiveAndDelete' });
      while ((await r.receiveMessages(100, { maxWaitTimeInMs: 300 })).length > 0);
      await r.close();
    }
  };
  const takeOne = async (entity: string) => {
    const r = infra.client.createReceiver(entity, { receiveMode: 'receiveAndDelete' });
    const [m] = await r.receiveMessages(1, { maxWaitTimeInMs: 2000 });
    await r.close();
    return m;
  };
  const watched = (deps: TestDeps): TestDeps => ({
    ...deps,
    schedulerBacklog: new ServiceBusQueueBacklog(infra.client, queues.scheduler),
    agentBacklog: (queue) => new ServiceBusQueueBacklog(infra.client, queue),
  });

  it('a request never picked up by a busy Agent is not a timeout: it waits for "not started", then retries free', async () => {
    const deps = await freshDeps(infra);
    await purge(queues.scheduler, queues.inventoryAgent);
    const gated = watched(deps);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId), 'claim-1');
    // The request waits unread in the Agent's queue past its complete-by.
    deps.clock.advanceSeconds(61);
    let report = await runSupervisor(gated, context('supervisor'));
    assert.deepEqual([report.candidates, report.postponed, report.retried], [1, 1, 0]);
    // The Agent reads it at last: too late to start, it says so.
    const request = await takeOne(queues.inventoryAgent);
    assert.equal(request.correlationId, orderId);
    await handleAgentRequest(
      {
        bus: deps.bus,
        clock: deps.clock,
        serviceUrl: 'http://127.0.0.1:9',
        refusals: orderRefusals.inventory,
      },
      queues.inventoryAgent,
      request.body,
      context('inventoryAgent', 'agent-1', request.messageId as string),
    );
    // Its reply waits behind the Scheduler: still not a timeout.
    deps.clock.advanceSeconds(1);
    report = await runSupervisor(gated, context('supervisor'));
    assert.deepEqual([report.postponed, report.retried], [1, 0]);
    await deliver(deps, (await takeOne(queues.scheduler)).body, 'not-started-applied');
    // Applied: the step is retried and no failure is counted.
    report = await runSupervisor(gated, context('supervisor'));
    assert.deepEqual([report.postponed, report.retried], [0, 1]);
    const { state } = await load(deps, orderId);
    assert.deepEqual([state.processState, state.failureCount], ['Pending', 0]);
    assert.match(state.steps[0].lastError ?? '', /not started/);
  });

  it('a request unread on a queue no Agent consumes is a timeout after a claim timeout: a dead Agent still ends orders', async () => {
    const deps = await freshDeps(infra);
    await purge(queues.scheduler, queues.inventoryAgent);
    const gated = watched(deps);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId), 'claim-1');
    deps.clock.advanceSeconds(61);
    assert.equal((await runSupervisor(gated, context('supervisor'))).postponed, 1);
    deps.clock.advanceSeconds(deps.policy.claimTimeoutSeconds + 1);
    const report = await runSupervisor(gated, context('supervisor'));
    assert.deepEqual([report.postponed, report.retried], [0, 1]);
    assert.equal((await load(deps, orderId)).state.failureCount, 1);
    await purge(queues.inventoryAgent);
  });

  it('an early claim is deferred, never dropped, whatever the clocks', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId), 'claim-1');
    deps.clock.advanceSeconds(61);
    assert.equal((await sweep(deps)).retried, 1);
    await deliver(deps, processOrder(orderId, 'retry'), 'claim-2');
    // The 2nd timeout is written by a Supervisor that died before its scheduled retry went out.
    deps.clock.advanceSeconds(61);
    const backingOff = await writeOnly(deps, orderId, { type: 'TimedOut' });
    const due = backingOff.state.scheduledFor!.getTime();
    const retryId = processOrderMessageId(orderId, 'backoff-retry', 2, 1);
    assert.equal((await processOrders(orderId)).filter((m) => m.messageId === retryId).length, 0);

    // Some other copy arrives 25 s early: it does not claim, but the scheduled retry exists again.
    deps.clock.advanceSeconds(5);
    await handleSchedulerMessage(
      deps,
      processOrder(orderId, 'retry'),
      context('scheduler', 'x', 'stale-copy'),
    );
    assert.equal((await load(deps, orderId)).state.processState, 'Pending');
    const resent = (await processOrders(orderId)).filter((m) => m.messageId === retryId);
    assert.equal(resent.length, 1);
    assert.equal(resent[0].scheduledEnqueueTimeUtc?.getTime(), due);

    // The broker's clock runs ahead: it delivers that scheduled retry 25 s before the back-off ends
    // by this host's clock. The broker decided it is due, so it claims.
    await handleSchedulerMessage(
      deps,
      processOrder(orderId, 'backoff-retry'),
      context('scheduler', 'claim-3', retryId),
    );
    const { state } = await load(deps, orderId);
    assert.equal(state.processState, 'Processing');
    assert.equal(state.lockedBy, 'claim-3');
  });

  it('a Pending order nobody claimed (lost process-order) is re-notified at its complete-by, no failure counted', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps); // recorded, its message never sent
    for (let round = 1; round <= deps.policy.failureHardThreshold + 1; round++) {
      deps.clock.advanceSeconds(31);
      const report = await sweep(deps);
      assert.deepEqual([report.candidates, report.retried, report.gaveUp], [1, 1, 0]);
      const { state } = await load(deps, orderId);
      assert.deepEqual([state.processState, state.failureCount], ['Pending', 0]);
    }
    // Re-sent under the submission's own id every time: one message, not one per claim timeout.
    const notes = await processOrders(orderId);
    assert.deepEqual(
      notes.map((m) => m.messageId),
      [processOrderMessageId(orderId, 'submitted', 1, 1)],
    );
    await deliver(deps, notes[0].body);
    assert.equal((await load(deps, orderId)).state.processState, 'Processing');
  });

  it('crash after the give-up was written, before its alert and undo went out: the operator is still alerted', async () => {
    const deps = await freshDeps(infra);
    const orderId = await submitted(deps);
    await deliver(deps, processOrder(orderId));
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded'));
    // Two timeouts handled normally, the third (hard threshold) written by a Supervisor that then died.
    for (let n = 1; n <= 2; n++) {
      deps.clock.advanceSeconds(61 + 30);
      assert.equal((await sweep(deps)).retried, 1);
      if (n === 2) deps.clock.advanceSeconds(30); // the back-off
      await deliver(deps, processOrder(orderId, n === 1 ? 'retry' : 'backoff-retry'));
    }
    deps.clock.advanceSeconds(61);
    const written = await writeOnly(deps, orderId, { type: 'TimedOut' });
    assert.equal(written.state.processState, 'Compensating');
    assert.equal(written.state.errorCode, 'GaveUp');
    assert.equal(
      (await held(infra, queues.operatorAlerts, orderId)).length,
      0,
      'the alert was lost with the process',
    );

    // The lost undo times out; the next sweep sends it again, and the undo runs to the end.
    deps.clock.advanceSeconds(61);
    await sweep(deps);
    const undo = (await held(infra, queues.paymentAgent, orderId)).filter(
      (m) => m.subject === 'payment:compensate',
    );
    assert.deepEqual(
      undo.map((m) => m.body.attempt),
      [2],
    );
    await deliver(deps, reply(orderId, 'payment', 2, 'succeeded', 'compensate'));
    await deliver(deps, reply(orderId, 'inventory', 1, 'succeeded', 'compensate'));
    const { state } = await load(deps, orderId);
    assert.equal(state.processState, 'Error');
    const alerts = await held(infra, queues.operatorAlerts, orderId);
    assert.equal(alerts.length, 1, 'an order in Error always has its operator alert');
    assert.match(alerts[0].body.reason, /^GaveUp/);
  });
});
