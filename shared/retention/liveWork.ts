import type { ServiceBusClient } from '@azure/service-bus';
import { ServiceBusQueueBacklog } from '../messaging/backlog.js';
import { queues, waitingQueues } from '../messaging/entities.js';
import { IntakeGauge } from '../messaging/intakeGauge.js';

/** Whether live orders are being worked on or wait: what the purge gives way to. */
export interface LiveWork {
  busy(): Promise<boolean>;
}

let running = 0;

/**
 * Live invocations in progress in this process (Scheduler and Agents: the Service Bus triggered
 * functions; functions/liveWork.ts wraps them). A counter: free to read on every purged order.
 */
export const liveInvocations = {
  get running(): number {
    return running;
  },
  async track<T>(work: () => Promise<T> | T): Promise<T> {
    running += 1;
    try {
      return await work();
    } finally {
      running -= 1;
    }
  },
};

/** This process's own live invocations. */
export const inProcessLiveWork: LiveWork = { busy: async () => running > 0 };

/**
 * Live messages waiting or being handled on any instance: the head of each queue (a peek also
 * shows locked messages). Each queue's gauge is cached `queues.length` seconds, so the purge spends
 * about one peeked message (one Service Bus credit) a second, and only while a slice runs.
 */
export class QueueLiveWork implements LiveWork {
  constructor(private readonly gauges: Pick<IntakeGauge, 'read'>[]) {}

  async busy(): Promise<boolean> {
    const readings = await Promise.all(this.gauges.map((g) => g.read()));
    // A failed peek counts as quiet: the purge must not stall on a broker it does not need.
    return readings.some((r) => r.known && r.oldestWaitingSince !== undefined);
  }
}

/**
 * The queues live orders pass through: the Scheduler's (agents' replies too), each Agent's, and
 * each Agent's waiting queue (requests waiting for a limited service's call slot).
 */
export const liveQueues = (): string[] => [
  ...Object.entries(queues)
    .filter(([key]) => key === 'scheduler' || key.endsWith('Agent'))
    .map(([, name]) => name),
  ...waitingQueues,
];

export function serviceBusLiveWork(client: ServiceBusClient, names: string[] = liveQueues()): QueueLiveWork {
  const sampleMs = names.length * 1000;
  return new QueueLiveWork(
    names.map((q) => new IntakeGauge(new ServiceBusQueueBacklog(client, q, 1), sampleMs)),
  );
}

/** Busy when any is: the cheap in-process count first, the peeks only when it says quiet. */
export function anyLiveWork(...signals: LiveWork[]): LiveWork {
  return {
    async busy() {
      for (const s of signals) if (await s.busy()) return true;
      return false;
    },
  };
}
