import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { demoStackSettings } from '../../local/demo.js';
import { faultScenarios, timingFromSettings } from '../../local/faultScenarios.js';
import { faultSku } from '../../local/remoteServices/index.js';
import { orderApiClient, sampleOrder, waitForTerminal, type OrderStatus } from '../../local/orderClient.js';
import type { MetricLine, SpanLine, TelemetryLine } from '../../shared/observability/jsonLinesExporter.js';

// The real stack with telemetry written to a file (what `npm start -- --traces` does): the host
// process exports its spans and metrics there, and the test reads them back. No fake exporter:
// the file is the local exporter.

let stack: Stack;
let dir: string;
let file: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tracing-e2e-'));
  file = join(dir, 'telemetry.jsonl');
  stack = await startStack({
    ports: randomPorts,
    // A step timeout that a loaded machine does not reach by accident: only the faults time out.
    settings: {
      ...demoStackSettings,
      STEP_TIMEOUT_SECONDS: '8',
      TELEMETRY_FILE: file,
      TELEMETRY_METRICS_INTERVAL_MS: '500',
    },
  });
});
after(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function lines(): TelemetryLine[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as TelemetryLine);
}

const spans = () => lines().filter((l): l is SpanLine => l.type === 'span');

/** The latest exported value of each metric point, by name and attributes. */
function latestMetrics(): Map<string, MetricLine> {
  const latest = new Map<string, MetricLine>();
  for (const l of lines()) if (l.type === 'metric') latest.set(`${l.name}${JSON.stringify(l.attributes)}`, l);
  return latest;
}

function metric(name: string, attributes: Record<string, string> = {}): number | undefined {
  return latestMetrics().get(`${name}${JSON.stringify(attributes)}`)?.value;
}

/** Polls until `check` stops throwing (the file is written in batches); rethrows at the deadline. */
async function eventually<T>(check: () => T, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return check();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

function traceOf(all: SpanLine[], traceId: string): SpanLine[] {
  return all.filter((s) => s.traceId === traceId);
}

/** One tree: every span's parent is in the trace except exactly one root. */
function rootOf(trace: SpanLine[]): SpanLine {
  const ids = new Set(trace.map((s) => s.spanId));
  const roots = trace.filter((s) => s.parentSpanId === undefined || !ids.has(s.parentSpanId));
  assert.equal(roots.length, 1, `roots: ${roots.map((r) => r.name).join(', ')}`);
  return roots[0];
}

function submissionTrace(all: SpanLine[], orderId: string): SpanLine[] {
  const submission = all.find((s) => s.name === 'submitOrder' && s.attributes['order.id'] === orderId);
  assert.ok(submission, `no submission span for ${orderId}`);
  return traceOf(all, submission.traceId);
}

const count = (trace: SpanLine[], pred: (s: SpanLine) => boolean) => trace.filter(pred).length;

let finals: Map<string, OrderStatus>;
const ids: Record<'clean' | 'hang' | 'refused' | 'stalls' | 'exhausted', string> = {
  clean: '',
  hang: '',
  refused: '',
  stalls: '',
  exhausted: '',
};
const clientTraceId = randomBytes(16).toString('hex');
const clientSpanId = randomBytes(8).toString('hex');

test('a known mix of orders runs to its terminal states with telemetry on', async () => {
  const client = orderApiClient(stack.baseUrl, stack.functionKey);
  const scenarios = faultScenarios(timingFromSettings(stack.env), false);
  const skus = (kind: string) => scenarios.find((s) => s.kind === kind)!.skus;
  // The clean order carries a caller's traceparent: the whole order must join the caller's trace.
  const res = await fetch(`${stack.baseUrl}/orders`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-functions-key': stack.functionKey,
      traceparent: `00-${clientTraceId}-${clientSpanId}-01`,
    },
    body: JSON.stringify(sampleOrder('trace-clean')),
  });
  assert.equal(res.status, 202);
  ids.clean = ((await res.json()) as { orderId: string }).orderId;
  ids.hang = (await client.submit(sampleOrder('trace-hang', skus('hang')))).orderId;
  ids.refused = (await client.submit(sampleOrder('trace-refused', skus('permanent@3')))).orderId;
  // Operational failures at inventory (503s) outlast a dispatch's attempts: the step stalls, then
  // goes through once the service recovers.
  ids.stalls = (
    await client.submit(sampleOrder('trace-stalls', [faultSku('inventory', 'transient', 8)]))
  ).orderId;
  // Inventory never answers: timeouts until the Supervisor gives up.
  ids.exhausted = (
    await client.submit(sampleOrder('trace-exhausted', [faultSku('inventory', 'hang', 1000)]))
  ).orderId;
  finals = await waitForTerminal(client, Object.values(ids), { deadline: Date.now() + 150_000, pollMs: 300 });
  assert.equal(finals.get(ids.clean)?.processState, 'Processed');
  assert.equal(finals.get(ids.hang)?.processState, 'Processed');
  assert.ok((finals.get(ids.hang)?.failureCount ?? 0) >= 1, 'the hung order never timed out');
  assert.equal(finals.get(ids.refused)?.processState, 'Compensated');
  assert.equal(finals.get(ids.stalls)?.processState, 'Processed', JSON.stringify(finals.get(ids.stalls)));
  assert.equal(finals.get(ids.exhausted)?.error?.code, 'GaveUp', JSON.stringify(finals.get(ids.exhausted)));
});

test("one order's spans share the caller's trace id and form one tree", async () => {
  const trace = await eventually(() => {
    const t = traceOf(spans(), clientTraceId);
    assert.equal(
      count(t, (s) => s.kind === 'client'),
      3,
      'remote call spans',
    );
    assert.equal(
      count(t, (s) => s.name === 'scheduler'),
      4,
      'Scheduler invocations',
    );
    return t;
  });
  assert.equal(
    count(trace, (s) => s.name === 'submitOrder'),
    1,
  );
  for (const agent of ['inventoryAgent', 'paymentAgent', 'shippingAgent'])
    assert.equal(
      count(trace, (s) => s.name === agent),
      1,
      agent,
    );
  const root = rootOf(trace);
  assert.equal(root.name, 'submitOrder');
  assert.equal(root.parentSpanId, clientSpanId, "the submission continues the caller's span");
  for (const s of trace.filter((s) => s.name !== 'submitOrder'))
    assert.equal(s.attributes['order.id'], ids.clean, `${s.name} names the order`);
  const agents = trace.filter((s) => s.name.endsWith('Agent'));
  for (const a of agents) {
    assert.equal(a.attributes['order.attempt'], 1);
    assert.equal(a.attributes['order.run'], 1);
    assert.equal(a.attributes['order.outcome'], 'succeeded');
    assert.equal(typeof a.attributes['order.step'], 'string');
  }
  const schedulers = trace.filter((s) => s.name === 'scheduler');
  assert.ok(schedulers.every((s) => s.attributes['order.workflow_version'] === 1));
  assert.equal(schedulers.filter((s) => s.attributes['order.outcome'] === 'Processed').length, 1);
  // Every remote call is a child of its Agent's invocation, and the service saw its traceparent.
  const clientSpans = trace.filter((s) => s.kind === 'client');
  const received = [
    ...stack.remote.inventory.traceParents(),
    ...stack.remote.payment.traceParents(),
    ...stack.remote.shipping.traceParents(),
  ];
  for (const c of clientSpans) {
    assert.ok(
      agents.some((a) => a.spanId === c.parentSpanId),
      `${c.name} hangs off an Agent span`,
    );
    assert.ok(
      received.some((r) => r.traceParent === `00-${clientTraceId}-${c.spanId}-01`),
      `the service received the traceparent of ${c.name}`,
    );
  }
});

test("the order's history names its trace: every entry of the clean order carries the caller's trace id", async () => {
  const res = await fetch(`${stack.baseUrl}/orders/${ids.clean}/history`, {
    headers: { authorization: `Bearer ${stack.operatorKey}` },
  });
  assert.equal(res.status, 200);
  const { entries } = (await res.json()) as { entries: Array<{ event: string; traceId?: string }> };
  assert.ok(entries.length >= 5, `${entries.length} entries`);
  for (const e of entries) assert.equal(e.traceId, clientTraceId, `${e.event} names the trace`);
});

test("a retried order's second attempt and the Supervisor's sweep that caused it are in its trace", async () => {
  const trace = await eventually(() => {
    const t = submissionTrace(spans(), ids.hang);
    assert.ok(
      t.some((s) => s.name === 'paymentAgent' && s.attributes['order.attempt'] === 2),
      'second attempt',
    );
    return t;
  });
  rootOf(trace);
  const timeouts = trace.filter((s) => s.name === 'supervisor timeout');
  assert.equal(timeouts.length, finals.get(ids.hang)!.failureCount);
  assert.equal(timeouts[0].attributes['order.step'], 'payment');
  const sweeps = spans().filter((s) => s.name === 'supervisor');
  for (const t of timeouts) {
    assert.equal(t.links.length, 1);
    const sweep = sweeps.find((s) => s.spanId === t.links[0].spanId);
    assert.ok(sweep, 'the link names a Supervisor sweep span');
    assert.equal(sweep.traceId, t.links[0].traceId);
    assert.notEqual(sweep.traceId, trace[0].traceId, 'the sweep has its own trace');
  }
  // The history's TimedOut entries name the order's trace too, not the sweep's.
  const res = await fetch(`${stack.baseUrl}/orders/${ids.hang}/history`, {
    headers: { authorization: `Bearer ${stack.operatorKey}` },
  });
  assert.equal(res.status, 200);
  const { entries } = (await res.json()) as { entries: Array<{ event: string; traceId?: string }> };
  const timedOut = entries.filter((e) => e.event === 'TimedOut');
  assert.equal(timedOut.length, timeouts.length);
  for (const e of timedOut) assert.equal(e.traceId, trace[0].traceId, "TimedOut names the order's trace");
  // The retry's claim is a child of the Supervisor's span in the order's trace.
  const claimAfter = trace.filter(
    (s) => s.name === 'scheduler' && timeouts.some((t) => t.spanId === s.parentSpanId),
  );
  assert.ok(claimAfter.length >= 1);
});

test("a compensated order's undo calls are in its trace", async () => {
  const orderId = ids.refused;
  const received = () =>
    [
      ...stack.remote.inventory.traceParents(),
      ...stack.remote.payment.traceParents(),
      ...stack.remote.shipping.traceParents(),
    ].filter((r) => r.idempotencyKey.startsWith(`${orderId}:`));
  const trace = await eventually(() => {
    const t = submissionTrace(spans(), orderId);
    const names = t.filter((s) => s.kind === 'client').map((s) => s.name);
    for (const name of ['inventory reserve', 'payment charge', 'shipping create-shipment'])
      assert.ok(names.includes(name), `${name} in ${names.join(', ')}`);
    for (const name of ['inventory release', 'payment refund'])
      assert.ok(names.includes(name), `${name} in ${names.join(', ')}`);
    // Every call the services received for this order, undo calls included, came from a client
    // span of this trace.
    const clientIds = new Set(t.filter((s) => s.kind === 'client').map((s) => s.spanId));
    for (const r of received()) {
      const [, traceId, spanId] = (r.traceParent ?? '').split('-');
      assert.equal(traceId, t[0].traceId, `${r.operation} ${r.idempotencyKey} is in the order's trace`);
      assert.ok(clientIds.has(spanId), `${r.operation} ${r.idempotencyKey} came from a span of the trace`);
    }
    return t;
  });
  rootOf(trace);
  assert.ok(received().some((r) => r.operation === 'release' && r.idempotencyKey.endsWith(':compensate')));
  assert.ok(received().some((r) => r.operation === 'refund' && r.idempotencyKey.endsWith(':compensate')));
  const undo = trace.filter((s) => s.kind === 'client' && s.attributes['order.step_kind'] === 'compensate');
  assert.deepEqual([...new Set(undo.map((s) => s.name))].sort(), ['inventory release', 'payment refund']);
  const refused = trace.filter((s) => s.name === 'shipping create-shipment');
  assert.ok(refused.some((s) => s.attributes['order.outcome'] === 'failed-permanently'));
});

test('the metrics match the mix of orders', async () => {
  const views = [...finals.values()];
  const hang = finals.get(ids.hang)!;
  await eventually(() => {
    assert.equal(metric('orders.submitted'), 5);
    for (const state of ['Processed', 'Compensated', 'Error']) {
      const expected = views.filter((v) => v.processState === state).length;
      assert.equal(metric('orders.terminal', { state }) ?? 0, expected, state);
    }
    // Started compensating: the refused order, and the given-up one (its timed-out step is in doubt).
    const compensating = views.filter((v) => v.steps.some((st) => st.compensationAttempt > 0)).length;
    assert.equal(metric('orders.compensations'), compensating);
    assert.equal(metric('orders.given_up') ?? 0, views.filter((v) => v.error?.code === 'GaveUp').length);
    // Every forward step's timeout counts in its order's failure count, and a step's attempt is
    // the number of times it was dispatched.
    for (const step of ['inventory', 'payment', 'shipping']) {
      const dispatched = views.reduce(
        (n, v) => n + (v.steps.find((st) => st.name === step)?.attempt ?? 0),
        0,
      );
      assert.equal(metric('step.attempts', { step }) ?? 0, dispatched, `${step} attempts`);
    }
    // A timeout of a stalled step is counted too, but not in the order's failure count.
    const exhausted = finals.get(ids.exhausted)!;
    assert.ok((metric('step.timeouts', { step: 'inventory' }) ?? 0) >= exhausted.failureCount);
    assert.ok((metric('step.timeouts', { step: 'payment' }) ?? 0) >= hang.failureCount);
    assert.equal(metric('remote.failures', { service: 'shipping', kind: 'refusal' }), 1);
    assert.ok((metric('remote.failures', { service: 'inventory', kind: 'operational' }) ?? 0) >= 1);
    assert.equal(metric('remote.failures', { service: 'inventory', kind: 'refusal' }), undefined);
    assert.equal(metric('orders.in_flight'), 0);
    assert.equal(metric('orders.oldest_in_flight_age'), 0);
    assert.equal(metric('deadletters', { entity: 'scheduler' }), 0);
    assert.equal(metric('deadletters', { entity: 'order-status/subscriptions/all' }), 0);
  });
  const durations = latestMetrics().get('step.duration{"step":"shipping","outcome":"failed-permanently"}');
  assert.equal(durations?.count, 1);
});

test('the in-flight gauges count orders that are not finished', async () => {
  const client = orderApiClient(stack.baseUrl, stack.functionKey);
  // Held in payment for a while: in flight at the next samples.
  const slow = await client.submit(sampleOrder('trace-slow', [faultSku('payment', 'slow', 2500)]));
  await eventually(() => {
    assert.equal(metric('orders.in_flight'), 1);
    assert.ok((metric('orders.oldest_in_flight_age') ?? 0) >= 1);
  }, 20_000);
  await waitForTerminal(client, [slow.orderId], { deadline: Date.now() + 30_000, pollMs: 300 });
});
