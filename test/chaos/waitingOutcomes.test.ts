import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decide,
  historyEntryFor,
  orderWorkflowV2,
  type HistoryEntry,
  type OrderEvent,
  type OrderState,
} from '../../shared/domain/index.js';
import { waitingOutcomeViolations } from '../../chaos/waitingOutcomes.js';
import { at, orderId, policy } from '../domain/fixtures.js';

/**
 * Invariant 8 of the chaos run (issue 25): a waiting step's outcome comes only from a valid
 * callback, an operator's decision or a timeout. Histories made by the real transitions pass; the
 * same final state with a history that lacks the deciding row (or where a reply decided) fails.
 */
const wf = orderWorkflowV2;
const big = { items: [{ sku: 'SKU-1', quantity: 3, unitPrice: 400 }] };
const small = { items: [{ sku: 'SKU-1', quantity: 1, unitPrice: 10 }] };

function walk(events: OrderEvent[]): { state: OrderState; history: HistoryEntry[] } {
  let s: OrderState | null = null;
  const history: HistoryEntry[] = [];
  events.forEach((e, i) => {
    const d = decide(wf, s, e, at(i * 10), policy);
    history.push(historyEntryFor(e, s, d.state, at(i * 10), wf.version));
    s = d.state;
  });
  return { state: s!, history };
}

const head: OrderEvent[] = [
  { type: 'Submit', orderId },
  { type: 'Claim', by: 'inv' },
  { type: 'StepSucceeded', step: 'inventory', run: 1, attempt: 1 },
];
const tail: OrderEvent[] = [
  { type: 'StepAccepted', step: 'payment', run: 1, attempt: 1, reference: 'ch_1' },
  { type: 'CallbackAnswered', step: 'payment', run: 1, attempt: 1, outcome: 'succeeded' },
  { type: 'StepSucceeded', step: 'shipping', run: 1, attempt: 1 },
];
const approved: OrderEvent = { type: 'ApprovalDecided', by: 'ana', decision: 'approve', reason: 'ok' };

test('real histories pass: callback, operator decision, waiver', () => {
  const decidedByOperator = walk([...head, approved, ...tail]);
  assert.equal(decidedByOperator.state.processState, 'Processed');
  assert.deepEqual(waitingOutcomeViolations({ workflow: wf, order: big, ...decidedByOperator }), []);
  const waived = walk([{ type: 'Submit', orderId, waive: ['approval'] }, ...head.slice(1), ...tail]);
  assert.equal(waived.state.processState, 'Processed');
  assert.deepEqual(waitingOutcomeViolations({ workflow: wf, order: small, ...waived }), []);
});

test('a callback step completed by a reply, without its CallbackAnswered row, fails', () => {
  const good = walk([...head, approved, ...tail]);
  const forged = good.history.map((h) =>
    h.event === 'CallbackAnswered' ? { ...h, event: 'StepSucceeded', actor: 'agent' as const } : h,
  );
  const problems = waitingOutcomeViolations({ workflow: wf, order: big, state: good.state, history: forged });
  assert.equal(problems.length, 2, problems.join('\n'));
  assert.match(problems[0], /StepSucceeded \(run 1, attempt 1\) decided a callback step/);
  assert.match(problems[1], /payment: Completed at run 1 attempt 1 with 0 CallbackAnswered rows/);
});

test('an approval completed without an operator, a timeout or a valid waiver fails', () => {
  const good = walk([...head, approved, ...tail]);
  const noDecision = good.history.filter((h) => h.event !== 'ApprovalDecided');
  const problems = waitingOutcomeViolations({
    workflow: wf,
    order: big,
    state: good.state,
    history: noDecision,
  });
  assert.equal(problems.length, 1, problems.join('\n'));
  assert.match(problems[0], /approval: Completed \(attempt 1\) without an operator's decision/);
  // Waived, but the order is above the threshold: not a waiver the declaration allows.
  const waived = walk([{ type: 'Submit', orderId, waive: ['approval'] }, ...head.slice(1), ...tail]);
  assert.equal(waitingOutcomeViolations({ workflow: wf, order: big, ...waived }).length, 1);
});

test('one attempt answered twice fails', () => {
  const good = walk([...head, approved, ...tail]);
  const answer = good.history.find((h) => h.event === 'CallbackAnswered')!;
  const twice = [...good.history, answer];
  const problems = waitingOutcomeViolations({ workflow: wf, order: big, state: good.state, history: twice });
  assert.equal(problems.length, 1);
  assert.match(problems[0], /2 CallbackAnswered rows/);
});

test('an approval decided by its complete-by (TimedOut) passes', () => {
  // Escalation, then the declaration's default at the step's complete-by (order@2: refuse).
  let s = walk(head);
  const events: OrderEvent[] = [{ type: 'TimedOut' }, { type: 'TimedOut' }];
  const times = [23 * 3600 + 60, 24 * 3600 + 60];
  let state = s.state;
  const history = [...s.history];
  events.forEach((e, i) => {
    const d = decide(wf, state, e, at(times[i]), policy);
    history.push(historyEntryFor(e, state, d.state, at(times[i]), wf.version));
    state = d.state;
  });
  s = { state, history };
  assert.equal(state.steps.find((st) => st.name === 'approval')?.status, 'Failed');
  assert.deepEqual(waitingOutcomeViolations({ workflow: wf, order: big, ...s }), []);
});
