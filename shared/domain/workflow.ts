/**
 * A workflow is data: an ordered list of steps, each naming the Agent (its queue) that performs
 * it, the action to perform and the action that undoes it. The engine (transition.ts) runs any
 * workflow of this shape, so a new process is a new definition, not new engine code.
 */
export interface StepDefinition {
  /** Stable name, recorded in the state store and in message ids: lower-case, digits, '-'. */
  readonly name: string;
  /** The queue of the Agent that wraps the remote service for this step. */
  readonly agent: string;
  /** What the Agent is asked to do. */
  readonly action: string;
  /** What undoes the action, or null when the step has nothing to undo. */
  readonly compensation: string | null;
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
export type WorkflowDefinition = Omit<Workflow, 'version'> & { readonly version?: number };

const stepName = /^[a-z][a-z0-9-]{0,31}$/;
const actionName = /^[a-z][a-z0-9-]{0,63}$/;

export class InvalidWorkflow extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidWorkflow';
  }
}

/** Checks a definition once, at module load, so a typo fails at start-up rather than mid-order. */
export function defineWorkflow(definition: WorkflowDefinition): Workflow {
  if (!stepName.test(definition.name)) throw new InvalidWorkflow(`bad workflow name "${definition.name}"`);
  const version = definition.version ?? 1;
  if (!Number.isInteger(version) || version < 1) {
    throw new InvalidWorkflow(`workflow ${definition.name}: version must be an integer >= 1`);
  }
  if (definition.steps.length === 0) throw new InvalidWorkflow(`workflow ${definition.name} has no steps`);
  const seen = new Set<string>();
  for (const step of definition.steps) {
    if (!stepName.test(step.name)) throw new InvalidWorkflow(`bad step name "${step.name}"`);
    if (seen.has(step.name)) throw new InvalidWorkflow(`duplicate step "${step.name}"`);
    seen.add(step.name);
    if (step.agent.trim() === '') throw new InvalidWorkflow(`step ${step.name} names no agent`);
    if (!actionName.test(step.action)) throw new InvalidWorkflow(`step ${step.name}: bad action`);
    if (step.compensation !== null && !actionName.test(step.compensation)) {
      throw new InvalidWorkflow(`step ${step.name}: bad compensation`);
    }
  }
  return Object.freeze({
    name: definition.name,
    version,
    steps: Object.freeze(definition.steps.map((s) => Object.freeze({ ...s }))),
  });
}

/** `order@2`: how logs, alerts and docs name a version. */
export function workflowLabel(w: { name: string; version: number }): string {
  return `${w.name}@${w.version}`;
}

/** A step's declaration, found by name: steps are never matched by position. */
export function stepDefinition(workflow: Workflow, name: string): StepDefinition | undefined {
  return workflow.steps.find((s) => s.name === name);
}
