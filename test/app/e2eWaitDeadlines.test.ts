import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient } from '@azure/service-bus';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { StateStore } from '../../shared/stateStore/index.js';
import { queues } from '../../shared/messaging/entities.js';
import { repoRoot } from '../../chaos/harness.js';
import { approvalDefaultVariable, shortWaits, writeShortWaitAppRoot } from '../../chaos/waitingApp.js';
import { Api, orderBody, peekAll, terminal, waitFor } from './helpers.js';

/**
 * Issue 25's deadlines end to end on the real local stack, with order@2's waits in seconds
 * (chaos/waitingApp.ts: payment waits 4 s, heartbeats every 4 s up to 12 s; approval 10 s,
 * escalated 5 s before): heartbeats move complete-by forward up to the declared max and no
 * further; a step whose heartbeats stop times out at its heartbeat deadline; an approval nearing
 * complete-by alerts the operators, and at complete-by the declared default applies.
 */
describe('waiting steps: heartbeats, heartbeat deadlines, escalation, the default at complete-by', () => {
  let stack: Stack;
  let api: Api;
  let store: StateStore;
  let appRoot: string;

  before(async () => {
    appRoot = writeShortWaitAppRoot(repoRoot);
    stack = await startStack({
      ports: randomPorts,
      appRoot,
      settings: {
        NEW_ORDER_WORKFLOW_VERSION: '2',
        STEP_TIMEOUT_SECONDS: '5',
        SUPERVISOR_SCHEDULE: '*/1 * * * * *',
      },
    });
    api = new Api(stack);
    store = await StateStore.open({
      kind: 'connectionString',
      connectionString: stack.env.StateStoreConnection,
    });
  });
  after(async () => {
    await stack?.stop();
    if (appRoot) rmSync(appRoot, { recursive: true, force: true });
  });

  const hb = shortWaits.payment.heartbeat;
  const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

  /** An order whose payment waits; its callback is withheld (listed lost) so the test holds the token. */
  async function waitingPayment(): Promise<{ orderId: string; url: string; waitingSince: number }> {
    stack.remote.payment.setFaults({ callbackLossRate: 1 });
    const orderId = await api.place(['SKU-1']);
    const payment = await waitFor('payment to wait for its callback', async () => {
      const p = (await api.get(orderId)).body.steps?.find((s) => s.name === 'payment');
      return p?.status === 'Running' && p.waitingSince ? p : undefined;
    });
    const url = stack.remote.payment
      .webhooks()
      .find((w) => w.outcome === 'lost' && tokenOrder(w.url) === orderId)?.url;
    assert.ok(url, 'the payment service holds a callback URL for the order');
    return { orderId, url, waitingSince: Date.parse(String(payment.waitingSince)) };
  }

  const heartbeat = async (url: string) => {
    const r = await fetch(`${url}/heartbeat`, { method: 'POST' });
    return { status: r.status, body: (await r.json()) as { completeBy?: string } };
  };

  const timedOutAt = async (orderId: string, step: string): Promise<number | undefined> => {
    const items = (await store.history(orderId, 200))?.items ?? [];
    const t = items.find((h) => h.event === 'TimedOut' && h.step === step);
    return t?.at.getTime();
  };

  it('heartbeats move complete-by forward up to the declared max, then the step times out at the max', async () => {
    const { orderId, url, waitingSince } = await waitingPayment();
    const max = waitingSince + hb.maxSeconds * 1000;
    const deadlines: number[] = [];
    // Every 1.5 s, past the max: each heartbeat extends to now + interval, capped at the max.
    while (Date.now() < max + 2000) {
      const r = await heartbeat(url);
      if (r.status !== 202) break; // the step timed out at the max and moved on
      const completeBy = Date.parse(String(r.body.completeBy));
      assert.ok(completeBy <= max, `complete-by ${new Date(completeBy).toISOString()} past the max`);
      deadlines.push(completeBy);
      await new Promise((res) => setTimeout(res, 1500));
    }
    assert.ok(deadlines.length >= 5, `heartbeats accepted: ${deadlines.length}`);
    for (let i = 1; i < deadlines.length; i++)
      assert.ok(deadlines[i] >= deadlines[i - 1], 'never moved back');
    assert.ok(
      deadlines.at(-1)! - waitingSince > hb.intervalSeconds * 1000 + 4000,
      'heartbeats kept the step alive well past its first deadline',
    );
    assert.equal(deadlines.at(-1), max, 'the last heartbeats reach the declared max and stop there');
    const timedOut = await waitFor('the timeout at the max', () => timedOutAt(orderId, 'payment'), 20_000);
    assert.ok(timedOut >= max, `timed out ${seconds(max - timedOut)} before the max`);
    assert.ok(timedOut < max + 4000, `timed out ${seconds(timedOut - max)} after the max`);
    // The retry's callback (faults off) completes the order: one charge.
    stack.remote.payment.setFaults({ callbackDelayMs: 100 });
    assert.equal((await api.until(orderId, terminal)).processState, 'Processed');
    const charges = stack.remote.payment.ledger().effects.filter((e) => e.orderId === orderId);
    assert.equal(charges.length, 1);
  });

  it('a step whose heartbeats stop is timed out at its heartbeat deadline, not at the max', async () => {
    const { orderId, url, waitingSince } = await waitingPayment();
    let last = 0;
    for (let i = 0; i < 2; i++) {
      await new Promise((res) => setTimeout(res, 1500));
      const r = await heartbeat(url);
      assert.equal(r.status, 202);
      last = Date.parse(String(r.body.completeBy));
    }
    const timedOut = await waitFor(
      'the timeout at the heartbeat deadline',
      () => timedOutAt(orderId, 'payment'),
      20_000,
    );
    assert.ok(timedOut >= last, `timed out ${seconds(last - timedOut)} before the heartbeat deadline`);
    assert.ok(timedOut < last + 4000, `timed out ${seconds(timedOut - last)} after the heartbeat deadline`);
    assert.ok(timedOut < waitingSince + hb.maxSeconds * 1000, 'long before the max');
    // The stale token's heartbeat now changes nothing.
    assert.equal((await heartbeat(url)).status, 409);
    stack.remote.payment.setFaults({ callbackDelayMs: 100 });
    assert.equal((await api.until(orderId, terminal)).processState, 'Processed');
  });

  const big = () => ({ ...orderBody(['SKU-1']), items: [{ sku: 'SKU-1', quantity: 3, unitPrice: 400 }] });

  async function waitingApproval(): Promise<{ orderId: string; completeBy: number }> {
    const orderId = (await api.submit(big(), randomUUID())).body.orderId as string;
    const step = await waitFor('the approval to wait', async () => {
      const a = (await api.get(orderId)).body.steps?.find((s) => s.name === 'approval');
      return a?.status === 'Running' && a.waitingSince ? a : undefined;
    });
    return { orderId, completeBy: Date.parse(String(step.completeBy)) };
  }

  async function escalation(orderId: string) {
    const client = new ServiceBusClient(stack.serviceBus.connectionString);
    try {
      return await waitFor(
        'the escalation alert',
        async () =>
          (await peekAll(client, queues.operatorAlerts)).find(
            (m) => m.subject === 'ApprovalEscalated' && (m.body as { orderId?: string }).orderId === orderId,
          ),
        20_000,
      );
    } finally {
      await client.close();
    }
  }

  it('an approval nearing complete-by alerts the operators; at complete-by the default (refuse) compensates', async () => {
    const { orderId, completeBy } = await waitingApproval();
    const alert = await escalation(orderId);
    const alertedAt = Date.parse((alert.body as { at: string }).at);
    const escalateAt = completeBy - shortWaits.approval.escalateBeforeSeconds * 1000;
    assert.ok(
      alertedAt >= escalateAt && alertedAt < completeBy,
      `alerted ${seconds(completeBy - alertedAt)} before complete-by`,
    );
    assert.match(String((alert.body as { reason: string }).reason), /refused automatically/);
    const done = await api.until(orderId, terminal, 30_000);
    assert.equal(done.processState, 'Compensated');
    assert.equal(done.steps?.find((s) => s.name === 'approval')?.status, 'Failed');
    // Two Supervisor timeouts: the escalation, then the decision (the last one).
    const items = (await store.history(orderId, 200))?.items ?? [];
    const timeouts = items.filter((h) => h.event === 'TimedOut' && h.actor === 'supervisor');
    assert.equal(timeouts.length, 2, timeouts.map((h) => h.at.toISOString()).join(', '));
    const decidedAt = timeouts.at(-1)?.at.getTime();
    assert.ok(decidedAt !== undefined && decidedAt >= completeBy, 'decided at complete-by, not before');
    assert.ok(!items.some((h) => h.event === 'ApprovalDecided'), 'no operator decided');
    assert.equal(stack.remote.payment.ledger().effects.filter((e) => e.orderId === orderId).length, 0);
  });

  it('declared approve: at complete-by the order is approved and goes on', async () => {
    await stack.killHost('SIGTERM');
    stack.env[approvalDefaultVariable] = 'approve';
    await stack.startHost();
    stack.remote.payment.setFaults({ callbackDelayMs: 100 });
    const { orderId, completeBy } = await waitingApproval();
    const alert = await escalation(orderId);
    assert.match(String((alert.body as { reason: string }).reason), /approved automatically/);
    const done = await api.until(orderId, terminal, 30_000);
    assert.equal(done.processState, 'Processed');
    const approval = done.steps?.find((s) => s.name === 'approval');
    assert.equal(approval?.status, 'Completed');
    assert.ok(Date.parse(String(approval?.completedAt)) >= completeBy, 'approved at complete-by, not before');
    assert.equal(stack.remote.payment.ledger().effects.filter((e) => e.orderId === orderId).length, 1);
  });
});

function tokenOrder(url: string): string | undefined {
  try {
    const payload = url.split('/callbacks/')[1].split('.')[2];
    return (JSON.parse(Buffer.from(payload, 'base64url').toString()) as { o: string }).o;
  } catch {
    return undefined;
  }
}
