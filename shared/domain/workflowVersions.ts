import { InvalidWorkflow, workflowLabel, type Workflow } from './workflow.js';

/**
 * The workflow versions an app holds: every version that still has orders in flight, side by
 * side (`order@1`, `order@2`). New orders start on the latest; every other event is decided on
 * the version the order recorded. A version is removed from the app once the list API shows no
 * order on it is in flight (docs/architecture.md, "Changing the workflow").
 */
export interface WorkflowVersions {
  /** The highest version: what a new order starts on. */
  readonly latest: Workflow;
  /** Oldest first. */
  readonly all: readonly Workflow[];
  find(name: string, version: number): Workflow | undefined;
}

/** What the engine accepts: a registry, or one workflow (a registry of one version). */
export type Workflows = Workflow | WorkflowVersions;

export function workflowVersions(...workflows: Workflow[]): WorkflowVersions {
  if (workflows.length === 0) throw new InvalidWorkflow('an app needs at least one workflow version');
  const name = workflows[0].name;
  const seen = new Set<number>();
  for (const w of workflows) {
    if (w.name !== name) throw new InvalidWorkflow(`one app runs one workflow: ${w.name} is not ${name}`);
    if (seen.has(w.version)) throw new InvalidWorkflow(`${workflowLabel(w)} is declared twice`);
    seen.add(w.version);
  }
  const all = Object.freeze([...workflows].sort((a, b) => a.version - b.version));
  return Object.freeze({
    latest: all[all.length - 1],
    all,
    find: (n: string, v: number) => all.find((w) => w.name === n && w.version === v),
  });
}

export function versionsOf(workflows: Workflows): WorkflowVersions {
  return 'latest' in workflows ? workflows : workflowVersions(workflows);
}

/**
 * The version an order recorded, if this app holds it with the steps the order recorded. A
 * version whose steps differ from the order's rows was edited in place after orders started on
 * it: treated as not held, so no reply or dispatch is ever mapped to another step.
 */
export function workflowOf(
  workflows: Workflows,
  state: { workflow: string; workflowVersion: number; steps: readonly { name: string }[] },
): Workflow | undefined {
  const w = versionsOf(workflows).find(state.workflow, state.workflowVersion);
  if (!w || w.steps.length !== state.steps.length) return undefined;
  return w.steps.every((def, i) => def.name === state.steps[i].name) ? w : undefined;
}

/**
 * The same versions, new orders starting on `version` instead of the latest: a new version is
 * deployed held first and switched on by a setting (NEW_ORDER_WORKFLOW_VERSION), so it can be
 * rolled out, and back, without a deployment. Orders keep the version they started on either way.
 */
export function startingOn(versions: WorkflowVersions, version: number): WorkflowVersions {
  const start = versions.all.find((w) => w.version === version);
  if (!start) {
    throw new InvalidWorkflow(
      `new orders cannot start on version ${version}: this app holds ${versions.all.map(workflowLabel).join(', ')}`,
    );
  }
  return Object.freeze({ ...versions, latest: start });
}
