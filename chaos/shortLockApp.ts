import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { orderWorkflow } from '../shared/domain/orderWorkflow.js';

/**
 * A temporary function-app root that runs this repo's compiled functions with a short message lock:
 * the agent queues' LockDuration is shortened in a copy of Config.json and the host's lock renewal
 * is switched off in a copy of host.json. The repo's own Config.json and host.json stay as they are.
 * With these, an Agent whose remote call outlasts the lock loses its message to a second invocation,
 * which the app's normal settings (1 min lock, renewed for 5 min) never let happen.
 */
export interface ShortLockOptions {
  /** The repo whose package.json, host.json, Config.json and dist/ are used. */
  repoRoot: string;
  /** ISO 8601 duration; Azure's minimum is PT5S. */
  lockDuration: string;
  /** host.json TimeSpan; "00:00:00" turns renewal off. */
  maxAutoLockRenewalDuration: string;
  /**
   * host.json maxConcurrentCalls. A slow Agent holds a slot per delivery, and every redelivery takes
   * one more; raised so messages do not wait for a slot until their complete-by passes.
   */
  maxConcurrentCalls?: number;
}

interface EmulatorConfig {
  UserConfig: {
    Namespaces: Array<{ Queues: Array<{ Name: string; Properties: Record<string, unknown> }> }>;
  };
}

const agentQueues: string[] = orderWorkflow.steps.map((s) => s.agentQueue);

export function writeShortLockAppRoot(options: ShortLockOptions): string {
  const readJson = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;

  // `main` as an absolute glob: the host's loader expands it from "/" (local/host/appLoader.ts).
  const pkg = readJson<Record<string, unknown>>(join(options.repoRoot, 'package.json'));
  const main = join(options.repoRoot, String(pkg.main)).split('\\').join('/');

  const host = readJson<{ extensions?: { serviceBus?: Record<string, unknown> } }>(
    join(options.repoRoot, 'host.json'),
  );
  host.extensions = {
    ...host.extensions,
    serviceBus: {
      ...host.extensions?.serviceBus,
      maxAutoLockRenewalDuration: options.maxAutoLockRenewalDuration,
      ...(options.maxConcurrentCalls ? { maxConcurrentCalls: options.maxConcurrentCalls } : {}),
    },
  };

  const config = readJson<EmulatorConfig>(
    join(options.repoRoot, 'infra', 'servicebus-emulator', 'Config.json'),
  );
  let changed = 0;
  for (const ns of config.UserConfig.Namespaces) {
    for (const q of ns.Queues) {
      if (!agentQueues.includes(q.Name)) continue;
      q.Properties = { ...q.Properties, LockDuration: options.lockDuration };
      changed += 1;
    }
  }
  if (changed !== agentQueues.length) {
    throw new Error(`Config.json has ${changed} of the ${agentQueues.length} agent queues`);
  }
  // Written only once everything checked out, so a refusal leaves no folder behind.
  const root = mkdtempSync(join(tmpdir(), 'chaos-short-lock-'));
  writeFileSync(join(root, 'package.json'), JSON.stringify({ ...pkg, main }, null, 2));
  writeFileSync(join(root, 'host.json'), JSON.stringify(host, null, 2));
  mkdirSync(join(root, 'infra', 'servicebus-emulator'), { recursive: true });
  writeFileSync(join(root, 'infra', 'servicebus-emulator', 'Config.json'), JSON.stringify(config, null, 2));
  return root;
}
