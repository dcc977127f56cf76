import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { demoStackSettings } from '../../local/demo.js';
import type { SpanLine, TelemetryLine } from '../../shared/observability/jsonLinesExporter.js';

// Issue 25 on order@2 with telemetry to a file (as tracing.test.ts): the operator's approval and
// the payment service's callback arrive as HTTP requests of their own (their own traces), yet
// they join the order's trace: their spans are in it, linked to the request that brought them,
// and the history rows they write name the order's trace like every other row.

let stack: Stack;
let dir: string;
let file: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tracing-waiting-'));
  file = join(dir, 'telemetry.jsonl');
  stack = await startStack({
    ports: randomPorts,
    settings: {
      ...demoStackSettings,
      STEP_TIMEOUT_SECONDS: '8',
      NEW_ORDER_WORKFLOW_VERSION: '2',
      TELEMETRY_FILE: file,
    },
  });
});
after(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const spans = (): SpanLine[] =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as TelemetryLine)
        .filter((l): l is SpanLine => l.type === 'span')
    : [];

async function eventually<T>(check: () => T, timeoutMs = 30_000): Promise<T> {
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

test('the approval and the callback join the order trace, linked to their requests; their history rows name it', async () => {
  stack.remote.payment.setFaults({ callbackDelayMs: 300 });
  const traceId = randomBytes(16).toString('hex');
  const headers = { 'content-type': 'application/json', 'x-functions-key': stack.functionKey };
  const res = await fetch(`${stack.baseUrl}/orders`, {
    method: 'POST',
    headers: { ...headers, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
    body: JSON.stringify({
      customerId: 'trace-approval',
      items: [{ sku: 'SKU-1', quantity: 3, unitPrice: 400 }],
      shippingAddress: { name: 'A', line1: 'Main St 1', city: 'Berlin', postalCode: '10115', country: 'DE' },
    }),
  });
  assert.equal(res.status, 202);
  const { orderId } = (await res.json()) as { orderId: string };
  const view = async () =>
    (await (await fetch(`${stack.baseUrl}/orders/${orderId}`, { headers })).json()) as {
      processState: string;
      steps: Array<{ name: string; status: string; waitingSince?: string }>;
    };
  for (let v = await view(); ; v = await view()) {
    const a = v.steps.find((s) => s.name === 'approval');
    if (a?.status === 'Running' && a.waitingSince) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  // The operator's request carries a trace of its own (the console's).
  const operatorTrace = randomBytes(16).toString('hex');
  const decided = await fetch(`${stack.baseUrl}/orders/${orderId}/approval`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${stack.operatorKey}`,
      traceparent: `00-${operatorTrace}-${randomBytes(8).toString('hex')}-01`,
    },
    body: JSON.stringify({ decision: 'approve', reason: 'known customer' }),
  });
  assert.equal(decided.status, 202);
  const end = Date.now() + 60_000;
  let state = await view();
  while (state.processState !== 'Processed' && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 250));
    state = await view();
  }
  assert.equal(state.processState, 'Processed');

  const [approval, callback] = await eventually(() => {
    const trace = spans().filter((s) => s.traceId === traceId);
    const a = trace.find((s) => s.name === 'approval decided');
    const c = trace.find((s) => s.name === 'callback');
    assert.ok(a, `the approval span is in the order's trace: ${trace.map((s) => s.name).join(', ')}`);
    assert.ok(c, `the callback span is in the order's trace: ${trace.map((s) => s.name).join(', ')}`);
    return [a, c];
  });
  // Each is linked to the request that brought it (its own trace): the way from one to the other.
  const all = spans();
  for (const [span, request] of [
    [approval, 'orderApproval'],
    [callback, 'stepCallback'],
  ] as const) {
    assert.equal(span.links.length, 1, `${span.name} links to its request`);
    const linked = all.find((s) => s.spanId === span.links[0].spanId);
    assert.ok(linked, `${span.name}: the link names an exported span`);
    assert.equal(linked.name, request);
    assert.notEqual(linked.traceId, traceId, `${request} has its own trace`);
  }
  assert.equal(all.find((s) => s.spanId === approval.links[0].spanId)?.traceId, operatorTrace);

  const history = await fetch(`${stack.baseUrl}/orders/${orderId}/history`, {
    headers: { authorization: `Bearer ${stack.operatorKey}` },
  });
  const { entries } = (await history.json()) as { entries: Array<{ event: string; traceId?: string }> };
  for (const event of ['ApprovalDecided', 'StepAccepted', 'CallbackAnswered']) {
    const e = entries.find((x) => x.event === event);
    assert.ok(e, `${event} in the history`);
    assert.equal(e.traceId, traceId, `${event} names the order's trace`);
  }
});
