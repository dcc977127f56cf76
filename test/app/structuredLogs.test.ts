import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { HttpRequest } from '@azure/functions';
import { handleAgentRequest } from '../../shared/agents/agent.js';
import { dispatchMessageId, orderRefusals } from '../../shared/domain/index.js';
import { submitOrder } from '../../shared/http/orderApi.js';
import { queues } from '../../shared/messaging/entities.js';
import { handleSchedulerMessage } from '../../shared/scheduler/scheduler.js';
import { runSupervisor } from '../../shared/supervisor/supervisor.js';
import { startRemoteService } from '../../local/remoteServices/index.js';
import { orderBody } from './helpers.js';
import {
  context,
  freshDeps,
  held,
  load,
  processOrder,
  startInfra,
  type Captured,
  type Infra,
  type TestDeps,
} from './direct.js';

/**
 * Structured logs, read the way Application Insights gets them: each line one JSON object written
 * through the InvocationContext. Every handler is called directly with its own context, so each
 * invocation's lines are known exactly: the Scheduler's and the Agents' lines (one message of one
 * order per invocation) all name the order, the lines about a step attempt name the step and the
 * attempt, and an order that gives up leaves an error-level line naming it.
 */
type Step = 'inventory' | 'payment' | 'shipping';
const steps: Step[] = ['inventory', 'payment', 'shipping'];
const agentQueue: Record<Step, string> = {
  inventory: queues.inventoryAgent,
  payment: queues.paymentAgent,
  shipping: queues.shippingAgent,
};

interface Invocation {
  fn: string;
  /** The message the invocation handled was an Agent reply (or request) about a step. */
  aboutStep: boolean;
  logs: Captured[];
}

interface Line {
  fn: string;
  aboutStep: boolean;
  level: string;
  fields: Record<string, unknown>;
}

describe('structured logs: order, step and attempt on every line', () => {
  let infra: Infra;
  const services = {} as Record<Step, Awaited<ReturnType<typeof startRemoteService>>>;

  before(async () => {
    infra = await startInfra();
    for (const name of steps) services[name] = await startRemoteService({ name, port: 0 });
  });
  after(async () => {
    for (const name of steps) await services[name]?.stop();
    await infra?.stop();
  });

  /** Drives one order's handlers, giving each invocation a context that keeps its lines. */
  class Driver {
    readonly invocations: Invocation[] = [];
    orderId = '';
    constructor(readonly deps: TestDeps) {}

    private ctx(fn: string, aboutStep: boolean) {
      const logs: Captured[] = [];
      this.invocations.push({ fn, aboutStep, logs });
      return context(fn, randomUUID(), undefined, logs);
    }

    async submit(): Promise<string> {
      const res = await submitOrder(
        this.deps,
        new HttpRequest({
          method: 'POST',
          url: 'http://127.0.0.1/api/orders',
          headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() },
          body: { string: JSON.stringify(orderBody()) },
        }),
        this.ctx('submitOrder', false),
      );
      assert.equal(res.status, 202);
      this.orderId = (res.jsonBody as { orderId: string }).orderId;
      return this.orderId;
    }

    scheduler(body: unknown) {
      const aboutStep = (body as { type: string }).type === 'agent-reply';
      return handleSchedulerMessage(this.deps, body, this.ctx('scheduler', aboutStep));
    }

    supervisor() {
      return runSupervisor(this.deps, this.ctx('supervisor', false));
    }

    /** Runs the Agent on the request the Scheduler sent, then hands its reply to the Scheduler. */
    async agentRoundTrip(step: Step, attempt: number, kind: 'do' | 'compensate') {
      const id = dispatchMessageId(this.orderId, step, attempt, kind, 1);
      const request = (await held(infra, agentQueue[step], this.orderId)).find((m) => m.messageId === id);
      assert.ok(request, `request ${id} sent`);
      await handleAgentRequest(
        {
          bus: this.deps.bus,
          clock: this.deps.clock,
          serviceUrl: services[step].url,
          refusals: orderRefusals[step],
        },
        agentQueue[step],
        request.body,
        this.ctx(`${step}Agent`, true),
      );
      const reply = (await held(infra, queues.scheduler, this.orderId)).find(
        (m) => m.messageId === `${id}:reply`,
      );
      assert.ok(reply, `reply to ${id} sent`);
      await this.scheduler(reply.body);
    }

    lines(): Line[] {
      return this.invocations.flatMap((inv) => {
        assert.ok(inv.logs.length > 0, `${inv.fn} logged nothing`);
        return inv.logs.map((c) => {
          let fields: Record<string, unknown>;
          try {
            fields = JSON.parse(c.line) as Record<string, unknown>;
          } catch {
            assert.fail(`${inv.fn} wrote a line that is not JSON: ${c.line}`);
          }
          return { fn: inv.fn, aboutStep: inv.aboutStep, level: c.level, fields };
        });
      });
    }

    /** The properties every order's lines must have, whatever the path. */
    assertOrderStepAttempt(): Line[] {
      const lines = this.lines();
      for (const l of lines) {
        const where = `${l.fn}: ${JSON.stringify(l.fields)}`;
        assert.equal(typeof l.fields.msg, 'string', where);
        // The Supervisor's sweep summary is about the sweep, not an order.
        if (l.fn === 'supervisor' && l.fields.msg === 'sweep done') continue;
        assert.equal(l.fields.orderId, this.orderId, where);
        if (l.aboutStep) {
          assert.ok(steps.includes(l.fields.step as Step), where);
          assert.ok(Number.isInteger(l.fields.attempt) && (l.fields.attempt as number) >= 1, where);
        }
      }
      return lines;
    }
  }

  it('happy path: submission, Scheduler and Agents log the order on every line, and step and attempt on step lines', async () => {
    const d = new Driver(await freshDeps(infra));
    const orderId = await d.submit();
    const [note] = (await held(infra, queues.scheduler, orderId)).filter(
      (m) => m.subject === 'process-order',
    );
    assert.ok(note);
    await d.scheduler(note.body);
    for (const step of steps) await d.agentRoundTrip(step, 1, 'do');
    assert.equal((await load(d.deps, orderId)).state.processState, 'Processed');

    const lines = d.assertOrderStepAttempt();
    assert.deepEqual([...new Set(lines.map((l) => l.fn))].sort(), [
      'inventoryAgent',
      'paymentAgent',
      'scheduler',
      'shippingAgent',
      'submitOrder',
    ]);
    for (const step of steps) {
      const agentLines = lines.filter((l) => l.fn === `${step}Agent`);
      assert.ok(agentLines.length > 0);
      for (const l of agentLines) {
        assert.equal(l.fields.step, step);
        assert.equal(l.fields.attempt, 1);
        assert.equal(l.fields.kind, 'do');
      }
    }
    assert.deepEqual(
      lines
        .filter((l) => l.fn === 'scheduler' && l.aboutStep)
        .map((l) => [l.fields.msg, l.fields.step, l.fields.attempt]),
      steps.map((s) => ['reply applied', s, 1]),
    );
    const claimed = lines.filter((l) => l.fields.msg === 'claimed');
    assert.deepEqual(
      claimed.map((l) => [l.fields.step, l.fields.attempt]),
      [['inventory', 1]],
      'the claim names the step it dispatched',
    );
    assert.deepEqual(
      lines.filter((l) => l.level === 'error'),
      [],
      'a happy order logs no error',
    );
  });

  it('give-up: the Supervisor logs an error-level operator alert naming the order, next to the queued alert', async () => {
    const d = new Driver(await freshDeps(infra));
    const orderId = await d.submit();
    const [note] = (await held(infra, queues.scheduler, orderId)).filter(
      (m) => m.subject === 'process-order',
    );
    await d.scheduler(note.body);
    await d.agentRoundTrip('inventory', 1, 'do');
    // Payment never answers: three timeouts (policy: soft 2, hard 3, back-off 30 s).
    d.deps.clock.advanceSeconds(61);
    assert.equal((await d.supervisor()).retried, 1);
    await d.scheduler(processOrder(orderId, 'retry'));
    d.deps.clock.advanceSeconds(61);
    assert.equal((await d.supervisor()).retried, 1);
    d.deps.clock.advanceSeconds(30);
    await d.scheduler(processOrder(orderId, 'backoff-retry'));
    d.deps.clock.advanceSeconds(61);
    const gaveUpAt = d.invocations.length;
    assert.equal((await d.supervisor()).gaveUp, 1);
    // The undo runs to the end: the in-doubt payment, then inventory.
    await d.agentRoundTrip('payment', 1, 'compensate');
    await d.agentRoundTrip('inventory', 1, 'compensate');
    const { state } = await load(d.deps, orderId);
    assert.equal(state.processState, 'Error');
    assert.equal(state.errorCode, 'GaveUp');

    const lines = d.assertOrderStepAttempt();
    const giveUp = d.invocations[gaveUpAt];
    assert.equal(giveUp.fn, 'supervisor');
    const errors = giveUp.logs.filter((c) => c.level === 'error').map((c) => JSON.parse(c.line));
    assert.equal(errors.length, 1, JSON.stringify(giveUp.logs));
    assert.equal(errors[0].msg, 'operator alert');
    assert.equal(errors[0].orderId, orderId);
    assert.equal(errors[0].code, 'GaveUp');
    const alerts = await held(infra, queues.operatorAlerts, orderId);
    assert.equal(alerts.length, 1);
    assert.equal(alerts[0].body.orderId, orderId);
    // Every error-level line of the order's life names the order.
    for (const l of lines.filter((x) => x.level === 'error')) assert.equal(l.fields.orderId, orderId);
    // The Supervisor's lines name the step that ran out of time and its attempt.
    assert.deepEqual(
      lines
        .filter((l) => l.fn === 'supervisor' && String(l.fields.msg).startsWith('complete-by passed'))
        .map((l) => [l.fields.msg, l.fields.step, l.fields.attempt]),
      [
        ['complete-by passed; retrying', 'payment', 1],
        ['complete-by passed; retrying', 'payment', 2],
        ['complete-by passed; giving up', 'payment', 3],
      ],
    );
    // The undo's Agent lines name the step and attempt they undo.
    assert.deepEqual(
      lines
        .filter((l) => l.fn.endsWith('Agent') && l.fields.kind === 'compensate')
        .map((l) => [l.fields.step, l.fields.attempt]),
      [
        ['payment', 1],
        ['inventory', 1],
      ],
    );
  });
});
