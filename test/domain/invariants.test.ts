import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  isTerminal,
  orderWorkflow,
  outstandingCommands,
  TransitionRefused,
  type Command,
  type OrderEvent,
  type OrderState,
  type ProcessState,
} from '../../shared/domain/index.js';
import { apply, orderId, t0 } from './fixtures.js';

/**
 * Random event sequences against the transition function. Events are aimed partly at what the
 * order is waiting for and partly at random steps, runs and attempts (stale or duplicate
 * replies), with time advancing by random amounts so the Supervisor's TimedOut sometimes applies.
 */
const stepNames = orderWorkflow.steps.map((s) => s.name);

const eventArb = fc.oneof(
  fc.constant({ kind: 'claim' as const }),
  fc.record({
    kind: fc.constant('reply' as const),
    ok: fc.boolean(),
    aim: fc.boolean(),
    step: fc.constantFrom(...stepNames),
    dRun: fc.integer({ min: -1, max: 0 }),
    dAttempt: fc.integer({ min: -1, max: 1 }),
  }),
  fc.record({
    kind: fc.constant('compReply' as const),
    ok: fc.boolean(),
    aim: fc.boolean(),
    step: fc.constantFrom(...stepNames),
    dAttempt: fc.integer({ min: -1, max: 1 }),
  }),
  fc.constant({ kind: 'timeout' as const }),
  fc.constant({ kind: 'resubmit' as const }),
  fc.constant({ kind: 'cancel' as const }),
);
type Gen = typeof eventArb extends fc.Arbitrary<infer T> ? T : never;

function toEvent(g: Gen, s: OrderState): OrderEvent {
  switch (g.kind) {
    case 'claim':
      return { type: 'Claim', by: 'inv' };
    case 'timeout':
      return { type: 'TimedOut' };
    case 'resubmit':
      return { type: 'OperatorResubmit', by: 'op' };
    case 'cancel':
      return { type: 'OperatorCancel', by: 'op' };
    case 'reply': {
      const running = s.steps.find((x) => x.status === 'Running');
      const step = g.aim && running ? running : s.steps[stepNames.indexOf(g.step)];
      const e = {
        step: step.name,
        run: Math.max(1, s.run + g.dRun),
        attempt: Math.max(1, step.attempt + (g.aim ? 0 : g.dAttempt)),
      };
      return g.ok
        ? { type: 'StepSucceeded', ...e }
        : { type: 'StepFailedPermanently', ...e, error: 'declined' };
    }
    case 'compReply': {
      const comp = s.steps.find((x) => x.status === 'Compensating');
      const step = g.aim && comp ? comp : s.steps[stepNames.indexOf(g.step)];
      const e = {
        step: step.name,
        run: s.run,
        attempt: Math.max(1, step.compensationAttempt + (g.aim ? 0 : g.dAttempt)),
      };
      return g.ok
        ? { type: 'CompensationSucceeded', ...e }
        : { type: 'CompensationFailed', ...e, error: 'no' };
    }
  }
}

/** Process-state moves the engine may make: Error -> Pending is the operator's resubmit only. */
const allowedTransitions: Readonly<Record<ProcessState, readonly ProcessState[]>> = {
  Pending: ['Pending', 'Processing', 'Compensating', 'Compensated', 'Error'],
  Processing: ['Processing', 'Pending', 'Processed', 'Compensating', 'Compensated', 'Error'],
  Compensating: ['Compensating', 'Compensated', 'Error'],
  Processed: [],
  Compensated: [],
  Error: ['Pending'],
};

interface History {
  sent: Set<string>;
  compensatedInRun: Map<number, number[]>;
}

function check(prev: OrderState, next: OrderState, commands: Command[], h: History): void {
  // 1. only allowed process-state moves
  assert.ok(
    allowedTransitions[prev.processState].includes(next.processState),
    `${prev.processState} -> ${next.processState}`,
  );
  // 2. terminal is terminal, except Error -> resubmit (a new run)
  if (isTerminal(prev.processState)) {
    assert.equal(prev.processState, 'Error');
    assert.equal(next.run, prev.run + 1);
    assert.equal(next.processState, 'Pending');
  } else {
    assert.equal(next.run, prev.run);
    // 3. failure count never decreases within a run
    assert.ok(next.failureCount >= prev.failureCount);
  }
  // 4. compensation: only for completed or in-doubt steps, reverse order, at most once per run
  for (const [i, step] of next.steps.entries()) {
    const before = prev.steps[i];
    if (step.status === 'Compensating' && before.status !== 'Compensating') {
      assert.ok(
        ['Completed', 'Running', 'TimedOut'].includes(before.status),
        `compensating a ${before.status} step`,
      );
      const list = h.compensatedInRun.get(next.run) ?? [];
      assert.ok(!list.includes(i), `step ${i} compensated twice in run ${next.run}`);
      if (list.length > 0) assert.ok(i < list[list.length - 1], 'compensation not in reverse order');
      list.push(i);
      h.compensatedInRun.set(next.run, list);
    }
    // attempts only move forward within a run
    if (next.run === prev.run) {
      assert.ok(step.attempt >= before.attempt);
      assert.ok(step.compensationAttempt >= before.compensationAttempt);
    }
  }
  // 5. at most one step in flight; complete-by set exactly while non-terminal
  const inFlight = next.steps.filter((x) => x.status === 'Running' || x.status === 'Compensating');
  assert.ok(inFlight.length <= 1);
  assert.equal(next.completeBy === null, isTerminal(next.processState));
  if (next.processState === 'Processing') assert.equal(inFlight[0]?.status, 'Running');
  if (next.processState === 'Compensating') assert.equal(inFlight[0]?.status, 'Compensating');
  if (next.processState !== 'Processing') assert.equal(next.lockedBy, null);
  // a step is only Running/Completed once every earlier step is Completed
  const firstOpen = next.steps.findIndex((x) => x.status !== 'Completed');
  if (next.processState === 'Processing' || next.processState === 'Processed') {
    for (const [i, st] of next.steps.entries())
      if (i > firstOpen && firstOpen >= 0) assert.equal(st.status, 'NotStarted');
  }
  // 6. every message id is new, except a claim timeout's: the re-sent process-order message keeps
  // its id so that a copy still queued absorbs it (waiting must not pile messages up)
  const claimTimeout = prev.processState === 'Pending' && next.processState === 'Pending';
  for (const c of commands) {
    if (c.type === 'RaiseOperatorAlert' || c.type === 'PublishStatus') continue;
    if (claimTimeout && c.type === 'NotifyScheduler') {
      assert.equal(next.failureCount, prev.failureCount, 'a claim timeout counted a failure');
      continue;
    }
    assert.ok(!h.sent.has(c.messageId), `message id reused: ${c.messageId}`);
  }
  for (const c of commands) h.sent.add(c.messageId);
  // 7. healing re-sends only what was sent (same ids)
  for (const c of outstandingCommands(orderWorkflow, next, new Date(next.updatedAt))) {
    assert.ok(h.sent.has(c.messageId), `outstanding ${c.messageId} was never sent`);
  }
}

test('random event sequences keep every invariant; refusals change nothing', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(eventArb, fc.integer({ min: 0, max: 400 })), { minLength: 1, maxLength: 60 }),
      (steps) => {
        let now = t0.getTime();
        const first = apply(null, { type: 'Submit', orderId }, new Date(now));
        let state = first.state;
        const h: History = {
          sent: new Set(first.commands.map((c) => c.messageId)),
          compensatedInRun: new Map(),
        };
        for (const [g, advance] of steps) {
          now += advance * 1000;
          const event = toEvent(g, state);
          const snapshot = structuredClone(state);
          let next;
          try {
            next = apply(state, event, new Date(now));
          } catch (e) {
            assert.ok(e instanceof TransitionRefused, String(e));
            assert.deepEqual(state, snapshot);
            if (e.code === 'StaleAttempt')
              assert.ok(event.type.startsWith('Step') || event.type.startsWith('Compensation'));
            continue;
          }
          check(state, next.state, next.commands, h);
          state = next.state;
        }
      },
    ),
    { numRuns: 2000 },
  );
});

test('the Supervisor alone drives any order to a terminal state (no lost order)', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(eventArb, fc.integer({ min: 0, max: 100 })), { maxLength: 30 }),
      (prefix) => {
        let now = t0.getTime();
        let state = apply(null, { type: 'Submit', orderId }, new Date(now)).state;
        for (const [g, advance] of prefix) {
          now += advance * 1000;
          try {
            state = apply(state, toEvent(g, state), new Date(now)).state;
          } catch {
            /* refused: fine */
          }
        }
        // From here on nothing replies: only claims and timeouts. It must terminate.
        for (let i = 0; i < 100 && !isTerminal(state.processState); i++) {
          now = Math.max(now, state.completeBy!.getTime()) + 1000;
          try {
            state = apply(state, { type: 'Claim', by: 'x' }, new Date(now)).state;
          } catch {
            state = apply(state, { type: 'TimedOut' }, new Date(now)).state;
          }
        }
        assert.ok(isTerminal(state.processState), `stuck in ${state.processState}`);
      },
    ),
    { numRuns: 500 },
  );
});
