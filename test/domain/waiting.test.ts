import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  callbackVerdict,
  decide,
  defineWorkflow,
  InvalidWorkflow,
  isTransitionRefused,
  orderWorkflowV2,
  outstandingCommands,
  waivedSteps,
  type Command,
  type OrderEvent,
  type OrderState,
} from '../../shared/domain/index.js';
import { at, orderId, policy, t0 } from './fixtures.js';

/**
 * Waiting steps (issue 25) on order@2: inventory (reply), approval (operator), payment (callback,
 * heartbeats), shipping (reply). Every interleaving of dispatch, acceptance, callback, duplicate,
 * heartbeat, timeout, retry and operator action ends each attempt in exactly one outcome.
 */
const wf = orderWorkflowV2;

function step(s: OrderState, name: string) {
  return s.steps.find((st) => st.name === name)!;
}

function apply(s: OrderState | null, e: OrderEvent, now: Date) {
  return decide(wf, s, e, now, policy);
}

function toPayment(now = t0): OrderState {
  let s = apply(null, { type: 'Submit', orderId }, now).state;
  s = apply(s, { type: 'Claim', by: 'inv' }, now).state;
  s = apply(s, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, now).state;
  return apply(s, { type: 'ApprovalDecided', by: 'ana', decision: 'approve', reason: 'known customer' }, now)
    .state;
}

test('an approval waits with nothing sent; the order complete-by is the escalation, the step the decision', () => {
  let s = apply(null, { type: 'Submit', orderId }, t0).state;
  const d = apply(s, { type: 'Claim', by: 'inv' }, t0);
  s = apply(d.state, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(1)).state;
  const approval = step(s, 'approval');
  assert.equal(approval.status, 'Running');
  assert.equal(approval.completeBy!.getTime(), at(1 + 24 * 3600).getTime());
  assert.equal(s.completeBy!.getTime(), at(1 + 23 * 3600).getTime());
  assert.deepEqual(
    outstandingCommands(wf, s, at(2)).filter((c) => c.type === 'DispatchStep'),
    [],
  );
  // Escalation: an alert, nothing decided, complete-by moves to the step's.
  const esc = apply(s, { type: 'TimedOut' }, at(2 + 23 * 3600));
  assert.equal(step(esc.state, 'approval').status, 'Running');
  assert.deepEqual(
    esc.commands.map((c) => (c.type === 'RaiseOperatorAlert' ? c.code : c.type)),
    ['ApprovalEscalated'],
  );
  assert.equal(esc.state.completeBy!.getTime(), approval.completeBy!.getTime());
  assert.equal(esc.state.failureCount, 0);
  // At complete-by the declaration (refuse) decides: a refusal compensates inventory.
  const done = apply(esc.state, { type: 'TimedOut' }, at(3 + 24 * 3600));
  assert.equal(step(done.state, 'approval').status, 'Failed');
  assert.equal(done.state.processState, 'Compensating');
  assert.equal(done.state.compensationReason, 'step-failed');
});

test('an operator refusal compensates like a business refusal and names who and why', () => {
  let s = apply(null, { type: 'Submit', orderId }, t0).state;
  s = apply(s, { type: 'Claim', by: 'inv' }, t0).state;
  s = apply(s, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, t0).state;
  const d = apply(
    s,
    { type: 'ApprovalDecided', by: 'ana', decision: 'refuse', reason: 'fraud pattern' },
    at(5),
  );
  assert.equal(d.state.processState, 'Compensating');
  assert.match(step(d.state, 'approval').lastError!, /refused by ana: fraud pattern/);
  assert.ok(
    d.commands.some((c) => c.type === 'DispatchStep' && c.step === 'inventory' && c.kind === 'compensate'),
  );
});

test('orders at or below the amount skip the approval; above it they wait', () => {
  const small = waivedSteps(wf.steps, { items: [{ sku: 'a', quantity: 2, unitPrice: 500 }] });
  const large = waivedSteps(wf.steps, { items: [{ sku: 'a', quantity: 2, unitPrice: 500.01 }] });
  assert.deepEqual(small, ['approval']);
  assert.deepEqual(large, []);
  let s = apply(null, { type: 'Submit', orderId, waive: small }, t0).state;
  s = apply(s, { type: 'Claim', by: 'inv' }, t0).state;
  s = apply(s, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, t0).state;
  assert.equal(step(s, 'payment').status, 'Running', 'payment follows inventory directly');
});

test('a callback dispatch carries the token validity; the 202 begins the wait; a reply cannot complete it', () => {
  const s = toPayment();
  const dispatch = outstandingCommands(wf, s, t0).find((c) => c.type === 'DispatchStep');
  assert.ok(dispatch && dispatch.type === 'DispatchStep');
  // The call's window (60 s) plus the longest wait (heartbeats up to 6 h).
  assert.equal(dispatch.callbackUntil!.getTime(), at(60 + 6 * 3600).getTime());
  assert.throws(
    () => apply(s, { type: 'StepSucceeded', step: 'payment', run: 1, attempt: 1 }, at(1)),
    (e: unknown) => isTransitionRefused(e) && e.code === 'InvalidEvent',
  );
  const acc = apply(
    s,
    { type: 'StepAccepted', step: 'payment', run: 1, attempt: 1, reference: 'ch_1' },
    at(2),
  );
  assert.equal(step(acc.state, 'payment').reference, 'ch_1');
  // Heartbeats declared: the first deadline is the interval (900 s).
  assert.equal(acc.state.completeBy!.getTime(), at(2 + 900).getTime());
  assert.deepEqual(acc.commands, []);
  assert.deepEqual(outstandingCommands(wf, acc.state, at(3)), [], 'a waiting step owes no request');
  // Heartbeats move it forward, never past 6 h from the 202.
  let h = acc.state;
  for (let t = 800; t < 30_000; t += 800) {
    h = apply(h, { type: 'StepHeartbeat', step: 'payment', run: 1, attempt: 1 }, at(t)).state;
  }
  assert.equal(h.completeBy!.getTime(), at(2 + 6 * 3600).getTime());
  // Stopped heartbeats: timed out at the heartbeat deadline, retried under the same key.
  const to = apply(acc.state, { type: 'TimedOut' }, at(2 + 901));
  assert.equal(to.state.processState, 'Pending');
  assert.equal(step(to.state, 'payment').status, 'TimedOut');
  assert.equal(to.state.failureCount, 1);
  const retried = apply(to.state, { type: 'Claim', by: 'inv2' }, at(2 + 902));
  const again = retried.commands.find((c) => c.type === 'DispatchStep');
  assert.ok(again && again.type === 'DispatchStep' && again.attempt === 2);
  assert.equal(again.idempotencyKey, dispatch.idempotencyKey, 'the retry carries the same idempotency key');
});

test('a callback that beats the 202 is applied; the late 202 changes nothing', () => {
  const s = toPayment();
  const cb = apply(
    s,
    { type: 'CallbackAnswered', step: 'payment', run: 1, attempt: 1, outcome: 'succeeded' },
    at(1),
  );
  assert.equal(step(cb.state, 'payment').status, 'Completed');
  assert.equal(step(cb.state, 'shipping').status, 'Running');
  assert.throws(
    () => apply(cb.state, { type: 'StepAccepted', step: 'payment', run: 1, attempt: 1 }, at(2)),
    (e: unknown) => isTransitionRefused(e) && e.code === 'StaleAttempt',
  );
  assert.equal(
    callbackVerdict(cb.state, { orderId, step: 'payment', run: 1, attempt: 1 }, 'succeeded'),
    'duplicate',
  );
  assert.equal(
    callbackVerdict(cb.state, { orderId, step: 'payment', run: 1, attempt: 1 }, 'failed'),
    'moved-on',
  );
});

test('declarations are checked at load', () => {
  const base = {
    agent: 'svc',
    action: 'do-it',
    compensation: null,
    refusals: { statuses: [422], problemTypes: [] },
  };
  const bad = [
    { ...base, name: 'a', completion: 'callback' as const },
    { ...base, name: 'a', completion: 'approval' as const, wait: { completeBySeconds: 60 } },
    { ...base, name: 'a', wait: { completeBySeconds: 60 } },
    {
      ...base,
      name: 'a',
      completion: 'callback' as const,
      wait: { completeBySeconds: 600, heartbeat: { intervalSeconds: 60, maxSeconds: 300 } },
    },
    {
      ...base,
      name: 'a',
      completion: 'approval' as const,
      wait: { completeBySeconds: 60 },
      approval: { aboveAmount: 0, escalateBeforeSeconds: 60, atCompleteBy: 'approve' as const },
    },
  ];
  for (const s of bad) {
    assert.throws(() => defineWorkflow({ name: 'w', steps: [s] }), InvalidWorkflow, JSON.stringify(s));
  }
});

// --- the property ----------------------------------------------------------------------------

type Action =
  | { kind: 'reply' }
  | { kind: 'accept'; back: number }
  | { kind: 'callback'; back: number; outcome: 'succeeded' | 'failed' }
  | { kind: 'duplicate' }
  | { kind: 'heartbeat'; back: number }
  | { kind: 'timeout' }
  | { kind: 'claim' }
  | { kind: 'approve' | 'refuse' }
  | { kind: 'cancel' }
  | { kind: 'wait'; seconds: number };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  fc.constant<Action>({ kind: 'reply' }),
  fc.record({ kind: fc.constant('accept' as const), back: fc.nat(1) }),
  fc.record({
    kind: fc.constant('callback' as const),
    back: fc.nat(2),
    outcome: fc.constantFrom<'succeeded' | 'failed'>('succeeded', 'succeeded', 'failed'),
  }),
  fc.constant<Action>({ kind: 'duplicate' }),
  fc.record({ kind: fc.constant('heartbeat' as const), back: fc.nat(1) }),
  fc.constant<Action>({ kind: 'timeout' }),
  fc.constant<Action>({ kind: 'claim' }),
  fc.constantFrom<Action>({ kind: 'approve' }, { kind: 'refuse' }, { kind: 'cancel' }),
  fc.record({ kind: fc.constant('wait' as const), seconds: fc.integer({ min: 1, max: 4000 }) }),
);

/** Who ended an attempt of a waiting step. */
type Ending = 'callback' | 'operator' | 'timeout' | 'cancel';

interface World {
  s: OrderState;
  now: Date;
  endings: Map<string, Ending[]>;
  dispatched: Set<string>;
  lastCallback?: { step: string; run: number; attempt: number; outcome: 'succeeded' | 'failed' };
}

const waitingNames = ['approval', 'payment'];
const key = (st: string, run: number, attempt: number) => `${st}:${run}:${attempt}`;

function running(s: OrderState) {
  return s.steps.find((st) => st.status === 'Running');
}

/** Applies an event if the engine accepts it, recording which waiting attempt it ended. */
function tryApply(w: World, e: OrderEvent, ending?: Ending): boolean {
  const before = w.s;
  // An attempt is current only while the order is Processing (a cancel ends it, whatever the status).
  const r = before.processState === 'Processing' ? running(before) : undefined;
  let d;
  try {
    d = decide(wf, before, e, w.now, policy);
  } catch (err) {
    if (isTransitionRefused(err)) return false;
    throw err;
  }
  w.s = d.state;
  noteDispatches(w, d.commands);
  if (r && waitingNames.includes(r.name)) {
    const after = w.s.steps.find((st) => st.name === r.name)!;
    const ended =
      w.s.processState !== 'Processing' ||
      after.status !== 'Running' ||
      after.attempt !== r.attempt ||
      w.s.run !== before.run;
    if (ended) {
      const k = key(r.name, before.run, r.attempt);
      const how: Ending =
        e.type === 'TimedOut' ? 'timeout' : e.type === 'OperatorCancel' ? 'cancel' : ending!;
      assert.ok(how, `attempt ${k} ended by ${e.type}, which is no callback, operator decision or timeout`);
      w.endings.set(k, [...(w.endings.get(k) ?? []), how]);
      // A waiting step completes only by a callback, an operator's decision or (approval) complete-by.
      if (after.status === 'Completed') assert.ok(['callback', 'operator', 'timeout'].includes(how));
    }
  }
  return true;
}

function noteDispatches(w: World, commands: Command[]): void {
  for (const st of w.s.steps) {
    if (st.status === 'Running' && waitingNames.includes(st.name))
      w.dispatched.add(key(st.name, w.s.run, st.attempt));
  }
  void commands;
}

function act(w: World, a: Action): void {
  const r = running(w.s);
  const target = (back: number) =>
    r
      ? { step: r.name, run: w.s.run, attempt: Math.max(1, r.attempt - back) }
      : { step: 'payment', run: w.s.run, attempt: 1 };
  switch (a.kind) {
    case 'wait':
      w.now = new Date(w.now.getTime() + a.seconds * 1000);
      return;
    case 'reply':
      if (r && !waitingNames.includes(r.name))
        tryApply(w, { type: 'StepSucceeded', step: r.name, run: w.s.run, attempt: r.attempt });
      {
        const c = w.s.steps.find((st) => st.status === 'Compensating');
        if (c)
          tryApply(w, {
            type: 'CompensationSucceeded',
            step: c.name,
            run: w.s.run,
            attempt: c.compensationAttempt,
          });
      }
      return;
    case 'accept':
      tryApply(w, { type: 'StepAccepted', ...target(a.back), reference: 'ref' });
      return;
    case 'heartbeat':
      tryApply(w, { type: 'StepHeartbeat', ...target(a.back) });
      return;
    case 'callback':
    case 'duplicate': {
      const t = a.kind === 'callback' ? { ...target(a.back), outcome: a.outcome } : w.lastCallback;
      if (!t) return;
      w.lastCallback = t;
      const verdict = callbackVerdict(w.s, { orderId, ...t }, t.outcome);
      const applied = tryApply(w, { type: 'CallbackAnswered', ...t }, 'callback');
      // The route's verdict and the engine agree: only 'apply' changes anything.
      if (verdict !== 'apply') assert.equal(applied, false, `verdict ${verdict} but the engine applied it`);
      return;
    }
    case 'timeout':
      if (w.s.completeBy) w.now = new Date(Math.max(w.now.getTime(), w.s.completeBy.getTime() + 1));
      tryApply(w, { type: 'TimedOut' });
      return;
    case 'claim':
      tryApply(w, { type: 'Claim', by: 'inv' });
      return;
    case 'approve':
    case 'refuse':
      tryApply(w, { type: 'ApprovalDecided', by: 'op', decision: a.kind, reason: 'r' }, 'operator');
      return;
    case 'cancel':
      tryApply(w, { type: 'OperatorCancel', by: 'op' });
      return;
  }
}

test('property: every attempt of a waiting step ends exactly once, by a callback, an operator or a timeout', () => {
  fc.assert(
    fc.property(fc.array(actionArb, { maxLength: 60 }), (actions) => {
      const w: World = {
        s: decide(wf, null, { type: 'Submit', orderId }, t0, policy).state,
        now: t0,
        endings: new Map(),
        dispatched: new Set(),
      };
      for (const a of actions) act(w, a);
      // Drain: whatever happened, time and the Supervisor (plus Agents answering) finish the order.
      for (let i = 0; i < 200 && !['Processed', 'Compensated', 'Error'].includes(w.s.processState); i++) {
        act(w, { kind: 'claim' });
        act(w, { kind: 'reply' });
        act(w, { kind: 'timeout' });
      }
      assert.ok(
        ['Processed', 'Compensated', 'Error'].includes(w.s.processState),
        `stuck in ${w.s.processState}`,
      );
      for (const k of w.dispatched) {
        const e = w.endings.get(k) ?? [];
        assert.equal(e.length, 1, `attempt ${k} ended ${e.length} times (${e.join(', ')})`);
      }
      for (const k of w.endings.keys()) assert.ok(w.dispatched.has(k), `ending without a dispatch: ${k}`);
    }),
    { numRuns: 3000 },
  );
});
