import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decide,
  defineWorkflow,
  isTransitionRefused,
  orderWorkflow,
  outstandingCommands,
  TransitionRefused,
  type Command,
  type DispatchStep,
  type OrderEvent,
  type OrderState,
  type ProcessState,
  type RefusalCode,
} from '../../shared/domain/index.js';
import { apply, at, fixtures, frozen, orderId, policy, t0 } from './fixtures.js';

const fx = fixtures();

/** An event of each type, aimed at whatever the state is currently waiting for. */
function eventFor(type: OrderEvent['type'], s: OrderState): OrderEvent {
  const running = s.steps.find((st) => st.status === 'Running') ?? s.steps[0];
  const comp = s.steps.find((st) => st.status === 'Compensating') ?? s.steps[0];
  switch (type) {
    case 'Submit':
      return { type, orderId };
    case 'Claim':
      return { type, by: 'inv-2' };
    case 'StepSucceeded':
      return { type, step: running.name, run: s.run, attempt: Math.max(1, running.attempt) };
    case 'StepFailedPermanently':
      return {
        type,
        step: running.name,
        run: s.run,
        attempt: Math.max(1, running.attempt),
        error: 'declined',
      };
    case 'TimedOut':
      return { type };
    case 'StepStalled':
      return {
        type,
        step: running.name,
        run: s.run,
        attempt: Math.max(1, running.attempt),
        kind: 'do',
        detail: '401',
      };
    case 'StepWaiting':
      return {
        type,
        step: running.name,
        run: s.run,
        attempt: Math.max(1, running.attempt),
        kind: 'do',
        completeBy: at(600),
      };
    case 'CompensationSucceeded':
      return { type, step: comp.name, run: s.run, attempt: Math.max(1, comp.compensationAttempt) };
    case 'CompensationFailed':
      return {
        type,
        step: comp.name,
        run: s.run,
        attempt: Math.max(1, comp.compensationAttempt),
        error: 'no',
      };
    case 'OperatorResubmit':
      return { type, by: 'op' };
    case 'OperatorCancel':
      return { type, by: 'op', reason: 'customer asked' };
    case 'OperatorRetry':
      return { type, by: 'op' };
    case 'StepAccepted':
    case 'StepHeartbeat':
      return { type, step: running.name, run: s.run, attempt: Math.max(1, running.attempt) };
    case 'CallbackAnswered':
      return {
        type,
        step: running.name,
        run: s.run,
        attempt: Math.max(1, running.attempt),
        outcome: 'succeeded',
      };
    case 'ApprovalDecided':
      return { type, by: 'op', decision: 'approve', reason: 'checked' };
  }
}

type Expect = ProcessState | RefusalCode;
const refusedEverywhere = (code: RefusalCode): Record<ProcessState, Expect> => ({
  Pending: code,
  Processing: code,
  Compensating: code,
  Processed: code,
  Compensated: code,
  Error: code,
});

// Rows: event; columns: the state it meets; cell: resulting process state or refusal code.
const table: Record<OrderEvent['type'], Record<ProcessState, Expect>> = {
  Submit: refusedEverywhere('AlreadySubmitted'),
  Claim: { ...refusedEverywhere('NotAllowedInState'), Pending: 'Processing' },
  StepSucceeded: { ...refusedEverywhere('StaleAttempt'), Processing: 'Processing' },
  StepFailedPermanently: { ...refusedEverywhere('StaleAttempt'), Processing: 'Compensated' },
  TimedOut: {
    Pending: 'Pending',
    Processing: 'Pending',
    Compensating: 'Compensating',
    Processed: 'NotAllowedInState',
    Compensated: 'NotAllowedInState',
    Error: 'NotAllowedInState',
  },
  StepStalled: { ...refusedEverywhere('StaleAttempt'), Processing: 'Processing' },
  StepWaiting: { ...refusedEverywhere('StaleAttempt'), Processing: 'Processing' },
  CompensationSucceeded: { ...refusedEverywhere('StaleAttempt'), Compensating: 'Compensated' },
  CompensationFailed: { ...refusedEverywhere('StaleAttempt'), Compensating: 'Error' },
  OperatorResubmit: { ...refusedEverywhere('NotAllowedInState'), Error: 'Pending' },
  OperatorCancel: {
    ...refusedEverywhere('NotAllowedInState'),
    Pending: 'Compensated',
    Processing: 'Compensating',
  },
  // At this `now` every back-off has ended: nothing to skip (retry in a back-off: retryNow.test.ts).
  OperatorRetry: refusedEverywhere('NotAllowedInState'),
  // order@1 has no waiting step: its steps complete by their replies (waiting: callbacks.test.ts).
  StepAccepted: { ...refusedEverywhere('StaleAttempt'), Processing: 'InvalidEvent' },
  StepHeartbeat: { ...refusedEverywhere('StaleAttempt'), Processing: 'InvalidEvent' },
  CallbackAnswered: { ...refusedEverywhere('StaleAttempt'), Processing: 'InvalidEvent' },
  ApprovalDecided: refusedEverywhere('NotAllowedInState'),
};

for (const [type, row] of Object.entries(table) as [OrderEvent['type'], Record<ProcessState, Expect>][]) {
  for (const [from, expected] of Object.entries(row) as [ProcessState, Expect][]) {
    test(`${type} in ${from} -> ${expected}`, () => {
      const state = frozen(structuredClone(fx[from]));
      const snapshot = structuredClone(state);
      const now = at(10_000); // past every complete-by, so TimedOut applies where allowed
      const event = eventFor(type, state);
      const isState = ['Pending', 'Processing', 'Compensating', 'Processed', 'Compensated', 'Error'].includes(
        expected,
      );
      if (isState) {
        const { state: next, commands } = apply(state, event, now);
        assert.equal(next.processState, expected);
        assert.deepEqual(state, snapshot, 'input untouched');
        assert.equal(next.updatedAt.getTime(), now.getTime());
        checkCommands(from, type, next, commands);
      } else {
        assert.throws(
          () => apply(state, event, now),
          (e: unknown) => e instanceof TransitionRefused && e.code === expected,
        );
        assert.deepEqual(state, snapshot, 'input untouched');
      }
    });
  }
}

function kinds(commands: Command[]): string[] {
  return commands.map((c) =>
    c.type === 'DispatchStep'
      ? `Dispatch:${c.step}:${c.kind}:${c.attempt}`
      : c.type === 'PublishStatus'
        ? `Status:${c.event}`
        : c.type === 'NotifyScheduler'
          ? `Notify:${c.reason}:${c.delaySeconds}`
          : `Alert:${c.code}`,
  );
}

function checkCommands(
  from: ProcessState,
  type: OrderEvent['type'],
  next: OrderState,
  commands: Command[],
): void {
  const expected: Record<string, string[]> = {
    'Pending/Claim': ['Dispatch:inventory:do:1'],
    'Processing/StepSucceeded': ['Status:step-completed', 'Dispatch:payment:do:1'],
    'Processing/StepFailedPermanently': ['Status:failed', 'Status:compensated'],
    'Pending/TimedOut': ['Notify:submitted:0', 'Status:received'],
    'Processing/TimedOut': ['Notify:retry:0'],
    'Processing/StepStalled': [],
    'Processing/StepWaiting': [],
    'Compensating/TimedOut': ['Dispatch:inventory:compensate:2'],
    'Compensating/CompensationSucceeded': ['Status:compensated'],
    'Compensating/CompensationFailed': ['Alert:CompensationFailed', 'Status:error'],
    'Error/OperatorResubmit': ['Notify:resubmitted:0', 'Status:received'],
    'Pending/OperatorCancel': ['Status:compensated'],
    'Processing/OperatorCancel': ['Status:compensating', 'Dispatch:inventory:compensate:1'],
  };
  assert.deepEqual(kinds(commands), expected[`${from}/${type}`], `commands of ${type} in ${from}`);
  if (
    next.processState === 'Error' ||
    next.processState === 'Processed' ||
    next.processState === 'Compensated'
  ) {
    assert.equal(next.completeBy, null);
  } else {
    assert.ok(next.completeBy instanceof Date);
  }
}

test('a non-Submit event for a missing order is refused; Submit creates a Pending order', () => {
  assert.throws(
    () => apply(null, { type: 'Claim', by: 'x' }),
    (e) => isTransitionRefused(e, 'NoSuchOrder'),
  );
  assert.throws(
    () => apply(null, { type: 'Submit', orderId: 'not-a-uuid' }),
    (e) => isTransitionRefused(e, 'InvalidEvent'),
  );
  const { state, commands } = apply(null, { type: 'Submit', orderId });
  assert.equal(state.processState, 'Pending');
  assert.equal(state.lockedBy, null);
  assert.equal(state.failureCount, 0);
  assert.equal(state.run, 1);
  assert.deepEqual(state.completeBy, at(policy.claimTimeoutSeconds));
  assert.deepEqual(
    state.steps.map((s) => [s.name, s.status, s.attempt]),
    [
      ['inventory', 'NotStarted', 0],
      ['payment', 'NotStarted', 0],
      ['shipping', 'NotStarted', 0],
    ],
  );
  assert.deepEqual(commands, [
    {
      type: 'NotifyScheduler',
      orderId,
      run: 1,
      reason: 'submitted',
      delaySeconds: 0,
      messageId: `${orderId}:process:submitted:1`,
    },
    {
      type: 'PublishStatus',
      orderId,
      run: 1,
      event: 'received',
      processState: 'Pending',
      at: t0,
      messageId: `${orderId}:status:received`,
    },
  ]);
});

test('claim sets LockedBy and CompleteBy and dispatches the first step in the same transition', () => {
  const { state, commands } = apply(fx.Pending, { type: 'Claim', by: 'invocation-7' }, at(5));
  assert.equal(state.lockedBy, 'invocation-7');
  assert.deepEqual(state.completeBy, at(5 + policy.stepTimeoutSeconds));
  assert.equal(state.steps[0].status, 'Running');
  assert.equal(state.steps[0].attempt, 1);
  const d = commands[0] as DispatchStep;
  assert.deepEqual(d, {
    type: 'DispatchStep',
    orderId,
    run: 1,
    step: 'inventory',
    agentQueue: 'agent-inventory',
    action: 'reserve',
    kind: 'do',
    attempt: 1,
    completeBy: at(5 + policy.stepTimeoutSeconds),
    delaySeconds: 0,
    idempotencyKey: `${orderId}:inventory`,
    actionIdempotencyKey: `${orderId}:inventory`,
    messageId: `${orderId}:inventory:1:do`,
  });
  assert.throws(
    () => apply(fx.Pending, { type: 'Claim', by: ' ' }),
    (e) => isTransitionRefused(e, 'InvalidEvent'),
  );
});

test('happy path: three steps then Processed, each dispatch to its own agent', () => {
  let s = apply(fx.Pending, { type: 'Claim', by: 'a' }, at(1)).state;
  const dispatched: string[] = [];
  for (const [i, step] of ['inventory', 'payment', 'shipping'].entries()) {
    const d = apply(s, { type: 'StepSucceeded', step, run: 1, attempt: 1 }, at(2 + i));
    s = d.state;
    for (const c of d.commands) if (c.type === 'DispatchStep') dispatched.push(`${c.agentQueue}/${c.action}`);
    if (i === 2) assert.deepEqual(kinds(d.commands), ['Status:step-completed', 'Status:processed']);
  }
  assert.deepEqual(dispatched, ['agent-payment/charge', 'agent-shipping/create-shipment']);
  assert.equal(s.processState, 'Processed');
  assert.equal(s.lockedBy, null);
  assert.equal(s.completeBy, null);
  assert.ok(s.steps.every((st) => st.status === 'Completed'));
});

test('a reply for an old attempt, an old run or a duplicate is StaleAttempt and changes nothing', () => {
  const claimed = apply(fx.Pending, { type: 'Claim', by: 'a' }, at(1)).state;
  const retried = apply(
    apply(claimed, { type: 'TimedOut' }, at(100)).state,
    { type: 'Claim', by: 'b' },
    at(101),
  ).state;
  assert.equal(retried.steps[0].attempt, 2);
  for (const ev of [
    { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 },
    { type: 'StepSucceeded', step: 'inventory', run: 2, attempt: 2 },
    { type: 'StepFailedPermanently', step: 'inventory', run: 1, attempt: 1, error: 'x' },
    { type: 'StepSucceeded', step: 'payment', run: 1, attempt: 2 },
  ] as OrderEvent[]) {
    assert.throws(
      () => apply(frozen(structuredClone(retried)), ev, at(102)),
      (e) => isTransitionRefused(e, 'StaleAttempt'),
    );
  }
  const done = apply(
    retried,
    { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 2 },
    at(102),
  ).state;
  assert.throws(
    () => apply(done, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 2 }, at(103)),
    (e) => isTransitionRefused(e, 'StaleAttempt'),
  );
});

test('malformed replies are refused: unknown step, non-integer attempt', () => {
  const s = fx.Processing;
  assert.throws(
    () => apply(s, { type: 'StepSucceeded', step: 'billing', run: 1, attempt: 1 }),
    (e) => isTransitionRefused(e, 'UnknownStep'),
  );
  assert.throws(
    () => apply(s, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 0.5 }),
    (e) => isTransitionRefused(e, 'InvalidEvent'),
  );
});

test('TimedOut before the complete-by has passed is refused (NotExpired)', () => {
  const s = fx.Processing; // completeBy = at(1 + 60)
  assert.throws(
    () => apply(s, { type: 'TimedOut' }, at(61)),
    (e) => isTransitionRefused(e, 'NotExpired'),
  );
  assert.equal(apply(s, { type: 'TimedOut' }, at(62)).state.processState, 'Pending');
});

test('Supervisor: retry, then extended back-off from the soft threshold, then give up at the hard one', () => {
  let s = fx.Pending;
  let now = 0;
  const seen: string[] = [];
  for (let failure = 1; failure <= policy.failureHardThreshold; failure++) {
    s = apply(s, { type: 'Claim', by: `inv-${failure}` }, at(++now)).state;
    assert.equal(s.steps[0].attempt, failure);
    now = (s.completeBy!.getTime() - t0.getTime()) / 1000 + 1;
    const d = apply(s, { type: 'TimedOut' }, at(now));
    s = d.state;
    assert.equal(s.failureCount, failure);
    seen.push(`${s.processState}:${kinds(d.commands).join(',')}`);
    if (s.processState === 'Pending') {
      assert.equal(s.lockedBy, null);
      assert.equal(s.steps[0].status, 'TimedOut');
      const delay = failure >= policy.failureSoftThreshold ? policy.extendedBackoffSeconds : 0;
      assert.deepEqual(s.completeBy, at(now + delay + policy.claimTimeoutSeconds));
    }
  }
  assert.deepEqual(seen, [
    'Pending:Notify:retry:0',
    'Pending:Notify:backoff-retry:300',
    'Pending:Notify:backoff-retry:300',
    // the step in doubt is compensated; the outcome will be Error, not Compensated
    'Compensating:Alert:GaveUp,Status:compensating,Dispatch:inventory:compensate:1',
  ]);
  const end = apply(s, { type: 'CompensationSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(now + 1));
  assert.equal(end.state.processState, 'Error');
  assert.equal(end.state.errorCode, 'GaveUp');
  // The alert goes with every move of an order that gave up (same id: duplicates are dropped).
  assert.deepEqual(kinds(end.commands), ['Alert:GaveUp', 'Status:error']);
});

test('a claim timeout is waiting, not failing: same message id, no failure, however often', () => {
  let s = fx.Pending;
  let now = 0;
  for (let i = 1; i <= policy.failureHardThreshold * 3; i++) {
    now += policy.claimTimeoutSeconds + 1;
    const d = apply(s, { type: 'TimedOut' }, at(now));
    s = d.state;
    assert.equal(s.processState, 'Pending');
    assert.equal(s.failureCount, 0);
    assert.deepEqual(s.completeBy, at(now + policy.claimTimeoutSeconds));
    // The same id as the submission's own message: a copy still queued absorbs the re-send.
    assert.deepEqual(
      d.commands.map((c) => c.messageId),
      [`${orderId}:process:submitted:1`, `${orderId}:status:received`],
    );
  }
  // After a step timed out (a real failure), an unclaimed retry does not count a second one.
  let p = apply(fx.Processing, { type: 'TimedOut' }, at(62)).state;
  assert.equal(p.failureCount, 1);
  p = apply(p, { type: 'TimedOut' }, at(62 + policy.claimTimeoutSeconds + 1)).state;
  assert.equal(p.failureCount, 1);
  assert.equal(p.processState, 'Pending');
});

test('healing re-sends the status events the recorded state implies: received, failed', () => {
  const ids = (s: OrderState) => outstandingCommands(orderWorkflow, s, s.updatedAt).map((c) => c.messageId);
  assert.ok(ids(fx.Pending).includes(`${orderId}:status:received`));
  const resubmitted = apply(fx.Error, { type: 'OperatorResubmit', by: 'op' }, at(9)).state;
  assert.ok(ids(resubmitted).includes(`${orderId}:status:received:run2`));
  // payment refused: inventory is undone (Compensating), the failed event is owed meanwhile...
  const atPayment = apply(
    fx.Processing,
    { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 },
    at(2),
  );
  const refused = apply(
    atPayment.state,
    { type: 'StepFailedPermanently', step: 'payment', run: 1, attempt: 1, error: 'declined' },
    at(3),
  );
  assert.equal(refused.state.processState, 'Compensating');
  const failedId = `${orderId}:status:failed:payment`;
  assert.ok(refused.commands.some((c) => c.messageId === failedId));
  assert.ok(ids(refused.state).includes(failedId));
  // ... and after the undo, in Compensated too; and when nothing needed undoing at all.
  const undone = apply(
    refused.state,
    { type: 'CompensationSucceeded', step: 'inventory', run: 1, attempt: 1 },
    at(4),
  ).state;
  assert.equal(undone.processState, 'Compensated');
  assert.ok(ids(undone).includes(failedId));
  const first = apply(
    fx.Processing,
    { type: 'StepFailedPermanently', step: 'inventory', run: 1, attempt: 1, error: 'out of stock' },
    at(2),
  ).state;
  assert.equal(first.processState, 'Compensated');
  assert.ok(ids(first).includes(`${orderId}:status:failed:inventory`));
});

test('permanent failure compensates completed steps in reverse order, each once', () => {
  let s = fx.Processing;
  s = apply(s, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(2)).state;
  s = apply(s, { type: 'StepSucceeded', step: 'payment', run: 1, attempt: 1 }, at(3)).state;
  let d = apply(
    s,
    { type: 'StepFailedPermanently', step: 'shipping', run: 1, attempt: 1, error: 'no route' },
    at(4),
  );
  assert.deepEqual(kinds(d.commands), [
    'Status:failed',
    'Status:compensating',
    'Dispatch:payment:compensate:1',
  ]);
  const refund = d.commands[2] as DispatchStep;
  assert.equal(refund.action, 'refund');
  assert.equal(refund.idempotencyKey, `${orderId}:payment:compensate`);
  assert.equal(refund.actionIdempotencyKey, `${orderId}:payment`);
  assert.equal(d.state.steps[2].status, 'Failed');
  assert.equal(d.state.steps[2].lastError, 'no route');
  d = apply(d.state, { type: 'CompensationSucceeded', step: 'payment', run: 1, attempt: 1 }, at(5));
  assert.deepEqual(kinds(d.commands), ['Dispatch:inventory:compensate:1']);
  assert.equal((d.commands[0] as DispatchStep).action, 'release');
  assert.throws(
    () => apply(d.state, { type: 'CompensationSucceeded', step: 'payment', run: 1, attempt: 1 }, at(6)),
    (e) => isTransitionRefused(e, 'StaleAttempt'),
  );
  d = apply(d.state, { type: 'CompensationSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(6));
  assert.equal(d.state.processState, 'Compensated');
  assert.deepEqual(
    d.state.steps.map((x) => x.status),
    ['Compensated', 'Compensated', 'Failed'],
  );
});

test('a timed-out compensation is re-dispatched, backed off, and given up at the hard threshold', () => {
  let s = fx.Compensating;
  const out: string[] = [];
  for (let i = 0; i < policy.failureHardThreshold; i++) {
    const now = (s.completeBy!.getTime() - t0.getTime()) / 1000 + 1;
    const d = apply(s, { type: 'TimedOut' }, at(now));
    s = d.state;
    out.push(kinds(d.commands).join(','));
  }
  assert.deepEqual(out, [
    'Dispatch:inventory:compensate:2',
    'Dispatch:inventory:compensate:3',
    'Dispatch:inventory:compensate:4',
    'Alert:CompensationGaveUp,Status:error',
  ]);
  assert.equal(s.processState, 'Error');
  assert.equal(s.steps[0].status, 'CompensationFailed');
});

test('operator resubmit: new run, fresh attempts, run-scoped idempotency keys, failure count reset', () => {
  let s = fx.Processing;
  s = apply(s, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(2)).state;
  for (let i = 0; i < policy.failureHardThreshold; i++) {
    s = apply(s, { type: 'TimedOut' }, at(10_000 * (i + 1))).state;
    if (s.processState === 'Pending')
      s = apply(s, { type: 'Claim', by: 'x' }, at(10_000 * (i + 1) + 1)).state;
  }
  assert.equal(s.processState, 'Compensating');
  s = apply(s, { type: 'CompensationSucceeded', step: 'payment', run: 1, attempt: 1 }, at(60_000)).state;
  s = apply(s, { type: 'CompensationSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(60_001)).state;
  assert.equal(s.processState, 'Error');
  const r = apply(s, { type: 'OperatorResubmit', by: 'alice' }, at(70_000));
  assert.equal(r.state.run, 2);
  assert.equal(r.state.failureCount, 0);
  assert.equal(r.state.errorCode, null);
  assert.ok(r.state.steps.every((st) => st.status === 'NotStarted' && st.attempt === 0 && st.run === 2));
  assert.equal((r.commands[0] as { messageId: string }).messageId, `${orderId}:process:resubmitted:2:run2`);
  const c = apply(r.state, { type: 'Claim', by: 'y' }, at(70_001));
  const d = c.commands[0] as DispatchStep;
  assert.equal(d.idempotencyKey, `${orderId}:inventory:run2`);
  assert.equal(d.messageId, `${orderId}:inventory:1:do:run2`);
  assert.equal(d.run, 2);
  // a late run-1 reply cannot touch run 2
  assert.throws(
    () => apply(c.state, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(70_002)),
    (e) => isTransitionRefused(e, 'StaleAttempt'),
  );
});

test('resubmit keeps Completed steps, reruns a refused undo under its old key, and redoes the rest', () => {
  let s = fx.Processing;
  s = apply(s, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(2)).state;
  s = apply(s, { type: 'StepSucceeded', step: 'payment', run: 1, attempt: 1 }, at(3)).state;
  s = apply(
    s,
    { type: 'StepFailedPermanently', step: 'shipping', run: 1, attempt: 1, error: 'x' },
    at(4),
  ).state;
  s = apply(
    s,
    { type: 'CompensationFailed', step: 'payment', run: 1, attempt: 1, error: 'refund refused' },
    at(5),
  ).state;
  assert.equal(s.processState, 'Error');
  const r = apply(s, { type: 'OperatorResubmit', by: 'op' }, at(6)).state;
  assert.deepEqual(
    r.steps.map((x) => [x.status, x.run]),
    [
      ['Completed', 1],
      // The refund was refused, so the run-1 charge may stand: charging again under the run-1
      // key lets the payment service answer from its record instead of charging twice.
      ['NotStarted', 1],
      ['NotStarted', 2],
    ],
  );
  const c = apply(r, { type: 'Claim', by: 'x' }, at(7));
  const dispatch = c.commands[0] as DispatchStep;
  assert.equal(dispatch.step, 'payment');
  assert.equal(dispatch.idempotencyKey, `${orderId}:payment`);
  assert.equal(dispatch.messageId, `${orderId}:payment:1:do:run2`);
});

test('cancel while a step is running compensates that in-doubt step too', () => {
  let s = apply(fx.Processing, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(2)).state;
  const d = apply(s, { type: 'OperatorCancel', by: 'op', reason: 'fraud' }, at(3));
  assert.deepEqual(kinds(d.commands), ['Status:compensating', 'Dispatch:payment:compensate:1']);
  assert.equal((d.commands[0] as { detail?: string }).detail, 'cancelled by op: fraud');
  s = d.state;
  // the agent's late success for the cancelled charge is ignored
  assert.throws(
    () => apply(s, { type: 'StepSucceeded', step: 'payment', run: 1, attempt: 1 }, at(4)),
    (e) => isTransitionRefused(e, 'StaleAttempt'),
  );
  s = apply(s, { type: 'CompensationSucceeded', step: 'payment', run: 1, attempt: 1 }, at(4)).state;
  s = apply(s, { type: 'CompensationSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(5)).state;
  assert.equal(s.processState, 'Compensated');
  assert.equal(s.steps[2].status, 'NotStarted');
});

test('outstanding commands re-create exactly what the last transition sent', () => {
  const cases: [OrderState, OrderEvent, Date][] = [
    [fx.Pending, { type: 'Claim', by: 'a' }, at(1)],
    [fx.Processing, { type: 'OperatorCancel', by: 'op' }, at(2)],
    [fx.Processing, { type: 'TimedOut' }, at(500)],
    [
      fx.Compensating,
      { type: 'CompensationFailed', step: 'inventory', run: 1, attempt: 1, error: 'x' },
      at(3),
    ],
  ];
  for (const [state, event, now] of cases) {
    const d = apply(state, event, now);
    const ids = new Set(d.commands.map((c) => c.messageId));
    const again = outstandingCommands(orderWorkflow, d.state, now);
    assert.ok(again.length > 0);
    for (const c of again) assert.ok(ids.has(c.messageId), `${event.type}: ${c.messageId} was sent`);
    const dispatch = again.find((c) => c.type === 'DispatchStep');
    if (dispatch)
      assert.deepEqual(
        dispatch,
        d.commands.find((c) => c.type === 'DispatchStep'),
      );
  }
  // Submission: the notify is re-created too (crash after the insert, before the send).
  const sub = apply(null, { type: 'Submit', orderId });
  assert.deepEqual(outstandingCommands(orderWorkflow, sub.state, t0)[0], sub.commands[0]);
  // A backed-off notify keeps its id and only waits for what is left of the back-off.
  let s = apply(fx.Processing, { type: 'TimedOut' }, at(62)).state;
  s = apply(s, { type: 'Claim', by: 'b' }, at(63)).state;
  s = apply(s, { type: 'TimedOut' }, at(124)).state;
  const heal = outstandingCommands(orderWorkflow, s, at(224));
  assert.deepEqual(heal, [
    {
      type: 'NotifyScheduler',
      orderId,
      run: 1,
      reason: 'backoff-retry',
      delaySeconds: 200,
      messageId: `${orderId}:process:backoff-retry:2`,
    },
  ]);
  // A crash after the last step's write loses its step-completed event and the processed event.
  assert.deepEqual(
    outstandingCommands(orderWorkflow, fx.Processed, at(9)).map((c) => c.messageId),
    [`${orderId}:status:step-completed:shipping`, `${orderId}:status:processed`],
  );
  // ... and after a middle step's write, its step-completed event beside the next dispatch.
  const mid = apply(fx.Processing, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(2));
  assert.deepEqual(
    outstandingCommands(orderWorkflow, mid.state, at(2)).map((c) => c.messageId),
    mid.commands.map((c) => c.messageId),
  );
});

test('healing after a resubmit does not invent a step-completed event for a step done in the earlier run', () => {
  // fast-check found it (seed 2049304739): inventory done in run 1, payment's undo refused
  // (Error), resubmit, claim of run 2. The claim starts payment; inventory's event went out in
  // run 1, so healing must not add a run-2 copy that was never sent.
  let s = apply(fx.Processing, { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 }, at(2)).state;
  s = apply(s, { type: 'OperatorCancel', by: 'op' }, at(3)).state;
  s = apply(s, { type: 'CompensationFailed', step: 'payment', run: 1, attempt: 1, error: 'no' }, at(4)).state;
  assert.equal(s.processState, 'Error');
  s = apply(s, { type: 'OperatorResubmit', by: 'op' }, at(5)).state;
  const claim = apply(s, { type: 'Claim', by: 'B' }, at(6));
  assert.equal(claim.state.steps[0].status, 'Completed');
  assert.equal(claim.state.steps[1].status, 'Running');
  assert.deepEqual(
    outstandingCommands(orderWorkflow, claim.state, at(6)).map((c) => c.messageId),
    claim.commands.map((c) => c.messageId),
    'healing re-sends exactly what the claim sent',
  );
});

const none = { statuses: [], problemTypes: [] };

test('another workflow runs on the same engine; a finished order of a workflow the app does not hold is refused', () => {
  const wf = defineWorkflow({
    name: 'refund-only',
    steps: [
      { name: 'notify', agent: 'mail', action: 'send', compensation: null, refusals: none },
      { name: 'payout', agent: 'payment', action: 'pay-out', compensation: 'claw-back', refusals: none },
    ],
  });
  let d = decide(wf, null, { type: 'Submit', orderId }, t0, policy);
  d = decide(wf, d.state, { type: 'Claim', by: 'x' }, at(1), policy);
  assert.equal((d.commands[0] as DispatchStep).agentQueue, 'agent-mail');
  d = decide(wf, d.state, { type: 'StepSucceeded', step: 'notify', run: 1, attempt: 1 }, at(2), policy);
  d = decide(
    wf,
    d.state,
    { type: 'StepFailedPermanently', step: 'payout', run: 1, attempt: 1, error: 'x' },
    at(3),
    policy,
  );
  // 'notify' completed but has no compensation: nothing to undo
  assert.equal(d.state.processState, 'Compensated');
  assert.throws(
    () => apply(d.state, { type: 'TimedOut' }),
    (e) => isTransitionRefused(e, 'WorkflowRetired'),
  );
  assert.throws(() => defineWorkflow({ name: 'x', steps: [] }), /no steps/);
  assert.throws(
    () =>
      defineWorkflow({
        name: 'x',
        steps: [
          { name: 'a', agent: 'q', action: 'do', compensation: null, refusals: none },
          { name: 'a', agent: 'q', action: 'do', compensation: null, refusals: none },
        ],
      }),
    /duplicate/,
  );
});
