import { spawn, type ChildProcess } from 'node:child_process';
import { setPriority } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { repoRoot } from '../chaos/harness.js';
import type { FaultSettings, LedgerSnapshot } from '../local/remoteServices/index.js';
import { serviceUrlSetting } from '../shared/config/settings.js';

/**
 * The demo payment service in a process of its own (issue 26's bench). In the stack it shares the
 * bench's process with the Service Bus emulator: while the emulator worked, a request's receipt
 * was stamped up to 221 ms after the Agent sent it, unevenly, and the service's own log showed 6
 * calls in a 1 s window that the gates had sent 1.05 s apart. A real provider is not hosted with
 * the broker. The service is driven over its admin routes (`/_admin/ledger`, `/_admin/faults`).
 */
export interface ServiceProcess {
  url: string;
  /** The app setting that points the Agents at it. */
  setting: Record<string, string>;
  ledger(): Promise<LedgerSnapshot>;
  setFaults(faults: FaultSettings): Promise<void>;
  stop(): Promise<void>;
}

export async function spawnPaymentService(): Promise<ServiceProcess> {
  const cli = join(repoRoot, 'dist', 'local', 'remoteServices', 'cli.js');
  const child: ChildProcess = spawn(
    process.execPath,
    [cli, '--inventory-port', '0', '--payment-port', '0', '--shipping-port', '0', '--quiet'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  // The measuring instrument first: a provider runs on machines of its own, and stamped behind
  // the hosts on two busy cores its log showed 3 calls sent 138 ms apart as received together
  // (23 in a 1 s window whose calls the holder had sent over 1.11 s). Raising a priority needs
  // the privilege; without it the bench says so and runs as before.
  try {
    setPriority(child.pid!, -10);
  } catch (e) {
    console.error(`the payment service runs at normal priority (${(e as Error).message})`);
  }
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const m = /^payment (http:\/\/\S+)$/.exec(line.trim());
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`the demo services exited (${code}) before listening`)));
  });
  const admin = (path: string, init?: RequestInit) =>
    fetch(`${url}/_admin/${path}`, { ...init, signal: AbortSignal.timeout(30_000) });
  return {
    url,
    setting: { [serviceUrlSetting('payment')]: url },
    async ledger() {
      return (await (await admin('ledger')).json()) as LedgerSnapshot;
    },
    async setFaults(faults) {
      const res = await admin('faults', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(faults),
      });
      if (!res.ok) throw new Error(`setting the payment service's faults: ${res.status}`);
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
