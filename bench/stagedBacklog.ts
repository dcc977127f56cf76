import { ServiceBusClient } from '@azure/service-bus';
import { addHost, sleep, type ChaosContext } from '../chaos/harness.js';
import { disabledSettingName } from '../local/host/disabled.js';
import type { SpawnedLocalHost } from '../local/host/index.js';
import { orderWorkflowVersions } from '../shared/domain/index.js';
import { agentKey, queues } from '../shared/messaging/entities.js';

/**
 * A backlog staged in front of the payment Agent (issue 26's bench, `--staged`). Two cores run
 * the whole pipeline at about 8 orders/s, so a limit of 20 calls/s never sees a backlog when the
 * orders flow in: the bench would measure the machine, not the limiter. Staged, the stack's own
 * host runs every function but the payment Agent (`AzureWebJobs.paymentAgent.Disabled`); the orders
 * are submitted and taken up to payment, their payment requests wait in its queue, and only then
 * do the payment hosts start, all together: the limit is measured draining a real backlog (as
 * after an outage), at the service's own log.
 */
export const paymentAgent = agentKey('payment');

/** The stack's settings for a staged run: no payment Agent, and complete-by far enough away. */
export function stagedSettings(stageSeconds: number): Record<string, string> {
  return {
    [disabledSettingName(paymentAgent)]: 'true',
    // The requests wait in the queue while the backlog builds: that is the bench's doing, not
    // the service's, so the step's timeout must not send the Supervisor after them meanwhile.
    STEP_TIMEOUT_SECONDS: String(Math.max(60, 2 * stageSeconds)),
  };
}

/** Messages in a queue (active and scheduled), by peeking: nothing is received. */
export async function queueDepth(connectionString: string, queue: string): Promise<number> {
  const client = new ServiceBusClient(connectionString);
  const receiver = client.createReceiver(queue);
  try {
    let count = 0;
    let from: Awaited<ReturnType<typeof receiver.peekMessages>>[number]['sequenceNumber'];
    for (;;) {
      const batch = await receiver.peekMessages(250, from === undefined ? {} : { fromSequenceNumber: from });
      count += batch.length;
      const last = batch.at(-1)?.sequenceNumber;
      if (batch.length === 0 || !last) return count;
      from = last.add(1);
    }
  } finally {
    await receiver.close();
    await client.close();
  }
}

/** Waits until `count` payment requests wait in the payment Agent's queue; throws past `withinMs`. */
export async function awaitStagedBacklog(
  ctx: ChaosContext,
  count: number,
  withinMs: number,
  out: (line: string) => void,
): Promise<void> {
  const from = Date.now();
  let depth = 0;
  while (Date.now() - from < withinMs) {
    depth = await queueDepth(ctx.serviceBus.connectionString, queues.paymentAgent);
    if (depth >= count) {
      out(`staged: ${depth} payment requests waiting after ${((Date.now() - from) / 1000).toFixed(1)} s`);
      return;
    }
    await sleep(2_000);
  }
  throw new Error(`staging: only ${depth} of ${count} payment requests reached the queue in ${withinMs} ms`);
}

/**
 * A payment host's settings: the payment Agent on; with `alone`, every other triggered function off
 * (the Scheduler, the Supervisor, the other Agents; its HTTP functions stay, idle).
 */
export function paymentHostSettings(alone: boolean): Record<string, string> {
  const others = alone
    ? [
        'scheduler',
        'supervisor',
        ...orderWorkflowVersions.all.flatMap((w) => w.steps.map((s) => agentKey(s.agent))),
      ].filter((f) => f !== paymentAgent)
    : [];
  return {
    ...Object.fromEntries(others.map((f) => [disabledSettingName(f), 'true'])),
    [disabledSettingName(paymentAgent)]: 'false',
  };
}

/** Starts `n` hosts with the payment Agent on, together (the stack's own host keeps it off). */
export function startPaymentHosts(ctx: ChaosContext, n: number, alone = false): Promise<SpawnedLocalHost[]> {
  return Promise.all(Array.from({ length: n }, () => addHost(ctx, paymentHostSettings(alone))));
}
