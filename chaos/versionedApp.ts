import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { holdWorkflowVersions } from '../shared/app/runtime.js';
import {
  defineWorkflow,
  orderWorkflow,
  stepDefinition,
  workflowVersions,
  type StepDefinition,
  type WorkflowVersions,
} from '../shared/domain/index.js';
import { writeAppRootWithout } from './partialApp.js';

/**
 * deploy-mid-flight's second version of the order workflow: payment moves before inventory, and a
 * new `deposit` step (a second charge at the payment service, under its own key) comes before
 * shipping. Test-only: the product holds `order@1` alone.
 */
const step = (name: string): StepDefinition => stepDefinition(orderWorkflow, name)!;
export const orderWorkflowV2 = defineWorkflow({
  name: 'order',
  version: 2,
  steps: [step('payment'), step('inventory'), { ...step('payment'), name: 'deposit' }, step('shipping')],
});

/** Every version the chaos run knows, to check an order's effects against its own version. */
export const chaosWorkflows: WorkflowVersions = workflowVersions(orderWorkflow, orderWorkflowV2);

/** The environment variable a versioned app root reads: the versions its host holds, e.g. `1,2`. */
export const versionsVariable = 'CHAOS_WORKFLOW_VERSIONS';

export function versionsFrom(list: string): WorkflowVersions {
  const chosen = list
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '')
    .map((v) => {
      const w = chaosWorkflows.all.find((x) => String(x.version) === v);
      if (!w) throw new Error(`${versionsVariable}: no workflow version ${v} (known: 1, 2)`);
      return w;
    });
  return workflowVersions(...chosen);
}

/** Loaded first by a versioned app root: holds the versions its host was started with. */
export function holdVersionsFromEnvironment(): void {
  holdWorkflowVersions(versionsFrom(process.env[versionsVariable] ?? '1'));
}

/**
 * A temporary app root that runs this repo's compiled functions holding the workflow versions
 * named by CHAOS_WORKFLOW_VERSIONS: a file that sorts before the functions' files chooses them
 * before any function is registered. Replacing the host with another value is a deployment.
 */
export function writeVersionedAppRoot(repoRoot: string): string {
  const root = writeAppRootWithout(repoRoot, []);
  writeFileSync(
    join(root, 'fns', '00-workflow-versions.js'),
    `require(${JSON.stringify(join(repoRoot, 'dist', 'chaos', 'versionedApp.js'))}).holdVersionsFromEnvironment();\n`,
  );
  return root;
}
