import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  decide,
  defineWorkflow,
  workflowVersions,
  type DispatchStep,
  type OrderState,
  type Workflow,
  type WorkflowVersions,
} from '../../shared/domain/index.js';
import { at, orderId, policy, t0 } from './fixtures.js';

/**
 * For any two versions of a workflow that differ by added, removed or reordered steps, held side
 * by side: an order started on either finishes with exactly its own version's steps and
 * compensations, in its own order. Each version declares its steps' actions with its own number,
 * so a command built from the other version's declaration would show.
 */

const pool = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'];

/** A version: some steps of the pool in some order, each with or without an undo. */
const stepsArb = fc
  .shuffledSubarray(pool, { minLength: 1, maxLength: pool.length })
  .chain((names) =>
    fc.tuple(
      fc.constant(names),
      fc.array(fc.boolean(), { minLength: names.length, maxLength: names.length }),
    ),
  );

function version(n: number, [names, undoable]: [string[], boolean[]]): Workflow {
  return defineWorkflow({
    name: 'order',
    version: n,
    steps: names.map((name, i) => ({
      name,
      agent: name,
      action: `do-${name}-v${n}`,
      compensation: undoable[i] ? `undo-${name}-v${n}` : null,
      refusals: { statuses: [422], problemTypes: [] },
    })),
  });
}

/** What happens to each step the order reaches: done, done after one silent timeout, or refused. */
type Fate = 'ok' | 'timeout-then-ok' | 'refused';
const fateArb = fc.constantFrom<Fate>('ok', 'ok', 'timeout-then-ok', 'refused');

interface Trace {
  state: OrderState;
  dispatched: DispatchStep[];
}

/** Drives one order to a terminal state, answering every request as its step's fate says. */
function run(versions: WorkflowVersions, start: OrderState, fates: Map<string, Fate>): Trace {
  let now = 1;
  const dispatched: DispatchStep[] = [];
  const timedOutOnce = new Set<string>();
  let d = decide(versions, start, { type: 'Claim', by: 'inv-1' }, at(now), policy);
  for (let guard = 0; guard < 200; guard++) {
    const request = d.commands.find((c): c is DispatchStep => c.type === 'DispatchStep');
    const claim = d.commands.some((c) => c.type === 'NotifyScheduler');
    if (['Processed', 'Compensated', 'Error'].includes(d.state.processState)) break;
    now += 1;
    if (request) {
      dispatched.push(request);
      const fate = fates.get(request.step) ?? 'ok';
      const { step, run: r, attempt } = request;
      if (request.kind === 'do' && fate === 'timeout-then-ok' && !timedOutOnce.has(step)) {
        timedOutOnce.add(step);
        now += policy.stepTimeoutSeconds + 1;
        d = decide(versions, d.state, { type: 'TimedOut' }, at(now), policy);
        continue;
      }
      const event =
        request.kind === 'compensate'
          ? ({ type: 'CompensationSucceeded', step, run: r, attempt } as const)
          : fate === 'refused'
            ? ({ type: 'StepFailedPermanently', step, run: r, attempt, error: 'no' } as const)
            : ({ type: 'StepSucceeded', step, run: r, attempt } as const);
      d = decide(versions, d.state, event, at(now), policy);
    } else if (claim) {
      d = decide(versions, d.state, { type: 'Claim', by: `inv-${now}` }, at(now), policy);
    } else {
      assert.fail(`stuck in ${d.state.processState} with ${JSON.stringify(d.commands)}`);
    }
  }
  return { state: d.state, dispatched };
}

/** How many steps the order reaches on its version before a refusal (or all of them). */
function expectedSteps(w: Workflow, fates: Map<string, Fate>): number {
  const refusedAt = w.steps.findIndex((s) => fates.get(s.name) === 'refused');
  return refusedAt < 0 ? w.steps.length : refusedAt + 1;
}

/** What the order's own version says must have happened, given the fates. */
function expected(w: Workflow, fates: Map<string, Fate>) {
  const refusedAt = w.steps.findIndex((s) => fates.get(s.name) === 'refused');
  const reached = refusedAt < 0 ? w.steps : w.steps.slice(0, refusedAt + 1);
  const completed = refusedAt < 0 ? [] : w.steps.slice(0, refusedAt);
  return {
    end: refusedAt < 0 ? 'Processed' : 'Compensated',
    dos: reached.flatMap((s) =>
      fates.get(s.name) === 'timeout-then-ok' ? [s.action, s.action] : [s.action],
    ),
    undos: [...completed].reverse().flatMap((s) => (s.compensation ? [s.compensation] : [])),
  };
}

test('an order started on either of two versions finishes with exactly its own steps and undos, in its own order', () => {
  fc.assert(
    fc.property(
      stepsArb,
      stepsArb,
      fc.dictionary(fc.constantFrom(...pool), fateArb),
      fc.boolean(),
      (a, b, fateRecord, onFirst) => {
        const v1 = version(1, a);
        const v2 = version(2, b);
        const fates = new Map(Object.entries(fateRecord));
        // Submitted while only its version was deployed; decided with both held.
        const own = onFirst ? v1 : v2;
        // The order's failure count spans its run: as many silent timeouts as the hard threshold
        // give it up, whatever the version (transition.test.ts covers that rule). Here: fewer.
        const reachedTimeouts = expected(own, fates).dos.length - expectedSteps(own, fates);
        fc.pre(reachedTimeouts < policy.failureHardThreshold);
        const submitted = decide(workflowVersions(own), null, { type: 'Submit', orderId }, t0, policy).state;
        assert.equal(submitted.workflowVersion, own.version);
        const both = workflowVersions(v1, v2);
        const { state, dispatched } = run(both, submitted, fates);
        const want = expected(own, fates);
        assert.equal(state.processState, want.end);
        assert.equal(state.workflowVersion, own.version);
        assert.deepEqual(
          state.steps.map((s) => s.name),
          own.steps.map((s) => s.name),
        );
        const dos = dispatched.filter((c) => c.kind === 'do');
        assert.deepEqual(
          dos.map((c) => c.action),
          want.dos,
        );
        assert.deepEqual(
          dispatched.filter((c) => c.kind === 'compensate').map((c) => c.action),
          want.undos,
        );
        // Each request names its step, its step's Agent and its step's own action.
        for (const c of dispatched) {
          assert.equal(c.agentQueue, `agent-${c.step}`);
          assert.match(c.action, new RegExp(`-${c.step}-v${own.version}$`));
        }
      },
    ),
    { numRuns: 300 },
  );
});

test('new orders start on the latest version held', () => {
  const v1 = version(1, [
    ['alpha', 'beta'],
    [true, true],
  ]);
  const v2 = version(2, [
    ['beta', 'alpha', 'gamma'],
    [true, true, false],
  ]);
  const s = decide(workflowVersions(v2, v1), null, { type: 'Submit', orderId }, t0, policy).state;
  assert.deepEqual([s.workflow, s.workflowVersion], ['order', 2]);
  assert.deepEqual(
    s.steps.map((st) => st.name),
    ['beta', 'alpha', 'gamma'],
  );
});

test('a version edited in place (same number, other steps) is treated as not held', () => {
  const v1 = version(1, [
    ['alpha', 'beta'],
    [true, true],
  ]);
  const edited = version(1, [
    ['beta', 'alpha'],
    [true, true],
  ]);
  const s = decide(v1, null, { type: 'Submit', orderId }, t0, policy).state;
  const d = decide(edited, s, { type: 'Claim', by: 'x' }, at(1), policy);
  assert.equal(d.state.processState, 'Error');
  assert.equal(d.state.errorCode, 'WorkflowRetired');
  assert.equal(d.commands.filter((c) => c.type === 'DispatchStep').length, 0);
});

test('a finished order of a version not held: events are refused, the resubmit too', () => {
  const v1 = version(1, [['alpha'], [true]]);
  const v2 = version(2, [
    ['alpha', 'beta'],
    [true, true],
  ]);
  let s = decide(v1, null, { type: 'Submit', orderId }, t0, policy).state;
  s = decide(v1, s, { type: 'Claim', by: 'x' }, at(1), policy).state;
  s = decide(workflowVersions(v2), s, { type: 'TimedOut' }, at(1000), policy).state;
  assert.equal(s.processState, 'Error');
  assert.throws(
    () => decide(workflowVersions(v2), s, { type: 'OperatorResubmit', by: 'op' }, at(1001), policy),
    /WorkflowRetired: .*order@1/,
  );
  // Deploying v1 again lets the operator resubmit it on its own version.
  const back = decide(workflowVersions(v1, v2), s, { type: 'OperatorResubmit', by: 'op' }, at(1002), policy);
  assert.deepEqual([back.state.processState, back.state.workflowVersion], ['Pending', 1]);
});
