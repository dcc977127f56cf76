import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { StateStore } from '../../shared/stateStore/index.js';
import { Api, orderBody, terminal, waitFor } from './helpers.js';

/**
 * Issue 25 end to end on order@2 (NEW_ORDER_WORKFLOW_VERSION=2): the payment service confirms by
 * webhook (202, then POST /api/callbacks/{token}); orders above 1,000 wait for an operator.
 */
describe('waiting steps through the stack', () => {
  let stack: Stack;
  let api: Api;
  let store: StateStore;

  before(async () => {
    stack = await startStack({
      ports: randomPorts,
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
  });

  const charges = (orderId: string) =>
    stack.remote.payment.ledger().effects.filter((e) => e.orderId === orderId && e.operation === 'charge');
  const callbacksFor = (orderId: string) =>
    stack.remote.payment.webhooks().filter((w) => {
      const token = w.url.split('/callbacks/')[1] ?? '';
      const payload = token.split('.')[2] ?? '';
      try {
        return (JSON.parse(Buffer.from(payload, 'base64url').toString()) as { o: string }).o === orderId;
      } catch {
        return false;
      }
    });
  const history = async (orderId: string) => (await store.history(orderId, 200))!.items.map((h) => h.event);
  const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const big = () => ({ ...orderBody(['SKU-1']), items: [{ sku: 'SKU-1', quantity: 3, unitPrice: 400 }] });

  it('payment by webhook: 202 with a reference, the step waits, the callback completes it', async () => {
    stack.remote.payment.setFaults({ callbackDelayMs: 1500 });
    const orderId = await api.place(['SKU-1']);
    const waiting = await waitFor('payment to wait for its callback', async () => {
      const v = (await api.get(orderId)).body;
      const p = v.steps?.find((s) => s.name === 'payment');
      return p?.status === 'Running' && p.waitingSince ? v : undefined;
    });
    assert.equal(waiting.workflowVersion, 2);
    assert.equal(
      waiting.steps?.find((s) => s.name === 'approval')?.status,
      'Completed',
      'small order: waived',
    );
    assert.match(String(waiting.steps?.find((s) => s.name === 'payment')?.reference), /^ch_/);
    const done = await api.until(orderId, terminal);
    assert.equal(done.processState, 'Processed');
    assert.equal(charges(orderId).length, 1);
    const events = await history(orderId);
    assert.ok(events.includes('StepAccepted') && events.includes('CallbackAnswered'), events.join(','));
  });

  it('the callback route: 200 duplicate, 409 moved on (in the history), 401 altered or forged, 400/413 bodies', async () => {
    stack.remote.payment.setFaults({ callbackDelayMs: 100 });
    const orderId = await api.place(['SKU-1']);
    await api.until(orderId, terminal);
    const [sent] = callbacksFor(orderId);
    assert.ok(sent, 'the payment service called back');
    const ok = { outcome: 'succeeded', reference: 'x' };
    const dup = await post(sent.url, ok);
    assert.equal(dup.status, 200);
    assert.equal(((await dup.json()) as { status: string }).status, 'duplicate');
    const other = await post(sent.url, { outcome: 'failed', error: { message: 'declined after all' } });
    assert.equal(other.status, 409);
    assert.equal(other.headers.get('content-type'), 'application/problem+json');
    assert.ok((await history(orderId)).includes('LateCallback'));
    const beat = await post(`${sent.url}/heartbeat`, {});
    assert.equal(beat.status, 409, 'a heartbeat for a finished attempt');
    const [prefix, kid, payload, sig] = sent.url.split('/callbacks/')[1].split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
    const altered = Buffer.from(JSON.stringify({ ...claims, s: 'shipping' })).toString('base64url');
    const base = sent.url.split('/callbacks/')[0];
    for (const token of [
      `${prefix}.${kid}.${altered}.${sig}`,
      `${prefix}.other.${payload}.${sig}`,
      'nonsense',
    ]) {
      const r = await post(`${base}/callbacks/${token}`, ok);
      assert.equal(r.status, 401, token);
      assert.equal(r.headers.get('content-type'), 'application/problem+json');
    }
    assert.equal((await post(sent.url, { outcome: 'maybe' })).status, 400);
    assert.equal((await post(sent.url, '{"outcome":')).status, 400);
    assert.equal((await post(sent.url, { outcome: 'succeeded', reference: 'r'.repeat(20_000) })).status, 413);
    const view = (await api.get(orderId)).body;
    assert.equal(view.processState, 'Processed', 'nothing changed');
    assert.equal(charges(orderId).length, 1);
  });

  it('callbacks delivered three times and before the 202: applied once, one charge', async () => {
    stack.remote.payment.setFaults({ callbackCopies: 3, callbackEarly: true });
    try {
      const ids = await Promise.all([1, 2, 3].map(() => api.place(['SKU-1'])));
      for (const orderId of ids) {
        const done = await api.until(orderId, terminal);
        assert.equal(done.processState, 'Processed');
        assert.equal(charges(orderId).length, 1);
        const sent = callbacksFor(orderId);
        assert.equal(sent.length, 3);
        const statuses = sent.map((w) => w.statuses.at(-1)).sort();
        assert.deepEqual(statuses, [200, 200, 202]);
        const events = await history(orderId);
        assert.equal(events.filter((e) => e === 'CallbackAnswered').length, 1);
      }
    } finally {
      stack.remote.payment.setFaults({});
    }
  });

  it('an order above 1,000 waits for an operator: approve goes on, refuse compensates; who and why in the history', async () => {
    const approved = (await api.submit(big(), randomUUID())).body.orderId as string;
    const refused = (await api.submit(big(), randomUUID())).body.orderId as string;
    for (const id of [approved, refused]) {
      await waitFor('approval to wait', async () => {
        const a = (await api.get(id)).body.steps?.find((s) => s.name === 'approval');
        return a?.status === 'Running' && a.waitingSince ? a : undefined;
      });
    }
    const client = await api.call('POST', `/orders/${approved}/approval`, {
      body: { decision: 'approve', reason: 'x' },
    });
    assert.equal(client.status, 403, 'a function key is not an operator credential');
    const bad = await api.call('POST', `/orders/${approved}/approval`, {
      operator: true,
      body: { decision: 'yes' },
    });
    assert.equal(bad.status, 400);
    const ok = await api.call('POST', `/orders/${approved}/approval`, {
      operator: true,
      body: { decision: 'approve', reason: 'known customer' },
    });
    assert.equal(ok.status, 202);
    const no = await api.call('POST', `/orders/${refused}/approval`, {
      operator: true,
      body: { decision: 'refuse', reason: 'fraud pattern' },
    });
    assert.equal(no.status, 202);
    assert.equal((await api.until(approved, terminal)).processState, 'Processed');
    const r = await api.until(refused, terminal);
    assert.equal(r.processState, 'Compensated');
    assert.equal(charges(refused).length, 0);
    const again = await api.call('POST', `/orders/${refused}/approval`, {
      operator: true,
      body: { decision: 'approve', reason: 'changed my mind' },
    });
    assert.equal(again.status, 409);
    const entries = (await store.history(refused, 200))!.items.filter((h) => h.event === 'ApprovalDecided');
    assert.equal(entries.length, 1);
    assert.equal(entries[0].actor, 'operator');
    assert.ok(entries[0].by);
    assert.match(String(entries[0].error), /refuse: fraud pattern/);
  });
});
