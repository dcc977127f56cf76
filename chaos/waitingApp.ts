import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { holdWorkflowVersions } from '../shared/app/runtime.js';
import {
  defineWorkflow,
  orderWorkflow,
  orderWorkflowV2,
  workflowVersions,
  type StepDefinition,
  type Workflow,
} from '../shared/domain/index.js';
import { writeAppRootWithout } from './partialApp.js';

/**
 * The product's order@2 (approval, payment by webhook) with its waits in seconds instead of hours,
 * so a chaos run or an end-to-end test sees timeouts, heartbeat deadlines, escalation and the
 * approval's default within a minute. Same name, version and steps as the product's: an order on it
 * is checked against the product's declaration (the invariants match steps by name).
 * Test-only, like versionedApp.ts.
 */
export const shortWaits = {
  /** payment: waits 4 s for its callback; heartbeats every 4 s keep it alive, up to 12 s. */
  payment: { completeBySeconds: 4, heartbeat: { intervalSeconds: 4, maxSeconds: 12 } },
  /** approval: 10 s, operators alerted 5 s before. */
  approval: { completeBySeconds: 10, escalateBeforeSeconds: 5 },
} as const;

/** The environment variable the app root reads: what an approval's complete-by decides. */
export const approvalDefaultVariable = 'WAITING_APPROVAL_AT_COMPLETE_BY';

export function shortWaitWorkflow(atCompleteBy: 'approve' | 'refuse' = 'refuse'): Workflow {
  const steps = orderWorkflowV2.steps.map((s): StepDefinition => {
    if (s.name === 'payment') return { ...s, wait: shortWaits.payment };
    if (s.name === 'approval')
      return {
        ...s,
        wait: { completeBySeconds: shortWaits.approval.completeBySeconds },
        approval: {
          ...s.approval!,
          escalateBeforeSeconds: shortWaits.approval.escalateBeforeSeconds,
          atCompleteBy,
        },
      };
    return s;
  });
  return defineWorkflow({ name: 'order', version: 2, steps });
}

/** Loaded first by the app root: order@1 and the short order@2, new orders on v2. */
export function holdShortWaitsFromEnvironment(): void {
  const atCompleteBy = process.env[approvalDefaultVariable] === 'approve' ? 'approve' : 'refuse';
  holdWorkflowVersions(workflowVersions(orderWorkflow, shortWaitWorkflow(atCompleteBy)));
}

/** A temporary app root running this repo's compiled functions with the short waits. */
export function writeShortWaitAppRoot(repoRoot: string): string {
  const root = writeAppRootWithout(repoRoot, []);
  writeFileSync(
    join(root, 'fns', '00-workflow-versions.js'),
    `require(${JSON.stringify(join(repoRoot, 'dist', 'chaos', 'waitingApp.js'))}).holdShortWaitsFromEnvironment();\n`,
  );
  return root;
}
