import type { CallLimits } from './callBudget.js';
import type { RefusalDeclaration } from './refusals.js';
import {
  waitDeclarationProblem,
  type ApprovalDeclaration,
  type Completion,
  type WaitDeclaration,
} from './waiting.js';

/**
 * A workflow is data: an ordered list of steps. Each step is declared once, here, with everything
 * the app derives from it: the Agent that performs it (its queue, its function, its service URL
 * setting), the action and its undo, how long the Agent has (complete-by), how hard the Agent
 * retries within that time, and which of the service's answers are a business "no". The engine
 * (transition.ts) runs any workflow of this shape, so a new process is a new definition, not new
 * engine code.
 */
export interface StepDeclaration {
  /** Stable name, recorded in the state store and in message ids: lower-case, digits, '-'. */
  readonly name: string;
  /**
   * The Agent that wraps the remote service for this step, named after the service (`payment`).
   * Its queue is `agent-{agent}`, its function `{agent in camelCase}Agent`, its service URL setting
   * `{AGENT}_SERVICE_URL`. One Agent per step.
   */
  readonly agent: string;
  /** What the Agent is asked to do. */
  readonly action: string;
  /** What undoes the action, or null when the step has nothing to undo. */
  readonly compensation: string | null;
  /**
   * Complete-by for this step (and its compensation) from its dispatch, in seconds. The
   * STEP_TIMEOUT_SECONDS setting is the default for a step that declares none and the ceiling for
   * one that does: it is the value checked against the host's lock renewal, duplicate-detection
   * window and function timeout, so no step may outlast it.
   */
  readonly completeBySeconds?: number;
  /** How the Agent retries one call within the complete-by (transient failures only). */
  readonly retry?: StepRetryPolicy;
  /** Which answers of the step's service are a business refusal; every other failure stalls. */
  readonly refusals: RefusalDeclaration;
  /**
   * How the step completes (waiting.ts): `reply` (default), `callback` (the service answers 202
   * and calls back later) or `approval` (an operator decides; no Agent is called).
   */
  readonly completion?: Completion;
  /** A waiting step's own complete-by (minutes to days) and heartbeats. */
  readonly wait?: WaitDeclaration;
  /** An approval step: which orders it holds, when it escalates, what complete-by decides. */
  readonly approval?: ApprovalDeclaration;
  /**
   * What the service allows across every instance together (calls/s, calls at once); settings
   * `{AGENT}_MAX_CALLS_PER_SECOND` / `{AGENT}_MAX_CONCURRENT_CALLS` override it (issue 26).
   */
  readonly limits?: CallLimits;
}

/** The Agent's in-call retries. Omitted fields take the Agent's defaults. */
export interface StepRetryPolicy {
  /** Requests sent at most for one dispatch. */
  readonly maxAttempts?: number;
  readonly initialDelayMs?: number;
  readonly maxDelayMs?: number;
  /** One attempt's budget, so a hung attempt cannot eat the whole complete-by. */
  readonly attemptTimeoutMs?: number;
}

export interface StepDefinition extends StepDeclaration {
  /** The queue of the step's Agent, derived from its name. */
  readonly agentQueue: string;
}

/**
 * One version of a workflow. An order is pinned to the version it started on (its state row
 * records name and version) and finishes, compensates or is resubmitted on that version, even
 * after a newer one is deployed. A changed process is a new version, never an edit of a
 * deployed one: `order@1` keeps its steps for as long as orders on it are in flight.
 */
export interface Workflow {
  readonly name: string;
  /** 1, 2, ...: the number orders record (a row written before versions existed is version 1). */
  readonly version: number;
  readonly steps: readonly StepDefinition[];
}

/** A workflow as written: the version may be left out for the first one. */
export interface WorkflowDeclaration {
  readonly name: string;
  readonly version?: number;
  readonly steps: readonly StepDeclaration[];
}

/** The queue an Agent listens on. */
export function agentQueueName(agent: string): string {
  return `agent-${agent}`;
}

const stepName = /^[a-z][a-z0-9-]{0,31}$/;
const agentName = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/;
const actionName = /^[a-z][a-z0-9-]{0,63}$/;

export class InvalidWorkflow extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidWorkflow';
  }
}

function positiveInteger(value: number | undefined, what: string): void {
  if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
    throw new InvalidWorkflow(`${what} must be a positive integer, got ${value}`);
  }
}

/** What an Agent is configured with; every step it serves must declare the same. */
const agentConfiguration = (s: StepDeclaration): string =>
  JSON.stringify([s.refusals, s.retry ?? null, s.completeBySeconds ?? null, s.limits ?? null]);

function checkStep(step: StepDeclaration, agents: Map<string, StepDeclaration>): void {
  if (!stepName.test(step.name)) throw new InvalidWorkflow(`bad step name "${step.name}"`);
  // Agent names become queue, function and setting names: keep them to what all three accept.
  if (!agentName.test(step.agent) || step.agent.length > 40) {
    throw new InvalidWorkflow(`step ${step.name}: bad agent name "${step.agent}"`);
  }
  // One Agent (one queue, one function) may serve several steps (a second charge at the payment
  // service, say), but it has one configuration: its steps must not disagree about it.
  const other = agents.get(step.agent);
  if (other && agentConfiguration(other) !== agentConfiguration(step)) {
    throw new InvalidWorkflow(
      `step ${step.name}: agent ${step.agent} also serves step ${other.name} with other refusals, retry, completeBySeconds or limits`,
    );
  }
  if (!other) agents.set(step.agent, step);
  if (!actionName.test(step.action)) throw new InvalidWorkflow(`step ${step.name}: bad action`);
  if (step.compensation !== null && !actionName.test(step.compensation)) {
    throw new InvalidWorkflow(`step ${step.name}: bad compensation`);
  }
  positiveInteger(step.completeBySeconds, `step ${step.name}: completeBySeconds`);
  const waitProblem = waitDeclarationProblem(step);
  if (waitProblem) throw new InvalidWorkflow(`step ${step.name}: ${waitProblem}`);
  for (const [key, value] of Object.entries(step.retry ?? {})) {
    positiveInteger(value as number | undefined, `step ${step.name}: retry.${key}`);
  }
  const { maxCallsPerSecond, maxConcurrentCalls } = step.limits ?? {};
  if (maxCallsPerSecond !== undefined && !(Number.isFinite(maxCallsPerSecond) && maxCallsPerSecond > 0)) {
    throw new InvalidWorkflow(`step ${step.name}: limits.maxCallsPerSecond must be a number > 0`);
  }
  positiveInteger(maxConcurrentCalls, `step ${step.name}: limits.maxConcurrentCalls`);
  const refusals = step.refusals as RefusalDeclaration | undefined;
  if (!refusals || !Array.isArray(refusals.statuses) || !Array.isArray(refusals.problemTypes)) {
    throw new InvalidWorkflow(`step ${step.name}: declares no refusals (statuses and problemTypes)`);
  }
  for (const status of refusals.statuses) {
    if (!Number.isInteger(status) || status < 400 || status > 499) {
      throw new InvalidWorkflow(`step ${step.name}: refusal status ${status} is not a 4xx`);
    }
  }
}

/** Checks a definition once, at module load, so a typo fails at start-up rather than mid-order. */
export function defineWorkflow<const D extends WorkflowDeclaration>(
  definition: D,
): {
  readonly name: D['name'];
  readonly version: number;
  readonly steps: readonly (D['steps'][number] & StepDefinition)[];
} {
  if (!stepName.test(definition.name)) throw new InvalidWorkflow(`bad workflow name "${definition.name}"`);
  const version = definition.version ?? 1;
  if (!Number.isInteger(version) || version < 1) {
    throw new InvalidWorkflow(`workflow ${definition.name}: version must be an integer >= 1`);
  }
  if (definition.steps.length === 0) throw new InvalidWorkflow(`workflow ${definition.name} has no steps`);
  const seen = new Set<string>();
  const agents = new Map<string, StepDeclaration>();
  for (const step of definition.steps) {
    if (seen.has(step.name)) throw new InvalidWorkflow(`duplicate step "${step.name}"`);
    seen.add(step.name);
    checkStep(step, agents);
  }
  return Object.freeze({
    name: definition.name,
    version,
    steps: Object.freeze(
      definition.steps.map((s) => Object.freeze({ ...s, agentQueue: agentQueueName(s.agent) })),
    ),
  });
}

export function stepIndex(workflow: Workflow, name: string): number {
  return workflow.steps.findIndex((s) => s.name === name);
}

/** `order@2`: how logs, alerts and docs name a version. */
export function workflowLabel(w: { name: string; version: number }): string {
  return `${w.name}@${w.version}`;
}

/** A step's declaration, found by name: steps are never matched by position. */
export function stepDefinition(workflow: Workflow, name: string): StepDefinition | undefined {
  return workflow.steps.find((s) => s.name === name);
}

/** A step's complete-by window: its own, never longer than the policy's (see StepDeclaration). */
export function stepTimeoutSeconds(step: StepDeclaration, ceilingSeconds: number): number {
  return Math.min(step.completeBySeconds ?? ceilingSeconds, ceilingSeconds);
}
