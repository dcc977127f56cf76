import { randomUUID } from 'node:crypto';
import { TableClient, type TransactionAction } from '@azure/data-tables';
import { ServiceBusClient, type ServiceBusReceiver, type ServiceBusSender } from '@azure/service-bus';
import { type BenchStack, submitOrder } from './benchStack.js';
import { ratePerSecond, summarize, type LatencySummary, type OrderCost } from './stats.js';

/**
 * Part 2: orders per second end to end with N concurrent clients (instant remote services), and
 * the floor: the same raw table and Service Bus operations one order needs (part 1's counts),
 * issued directly with the same SDK clients, at the same concurrency, through the same counting
 * proxies to the same Azurite and emulator.
 */
export interface RunFigures {
  concurrency: number;
  orders: number;
  elapsedMs: number;
  perSecond: number;
  latency: LatencySummary;
}

/** Runs `total` jobs over `concurrency` workers; returns per-job latencies and the wall time. */
async function closedLoop(
  concurrency: number,
  total: number,
  job: (worker: number) => Promise<number>,
): Promise<{ latencies: number[]; elapsedMs: number }> {
  let next = 0;
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      while (next < total) {
        next += 1;
        latencies.push(await job(w));
      }
    }),
  );
  return { latencies, elapsedMs: performance.now() - t0 };
}

function figures(concurrency: number, r: { latencies: number[]; elapsedMs: number }): RunFigures {
  return {
    concurrency,
    orders: r.latencies.length,
    elapsedMs: r.elapsedMs,
    perSecond: ratePerSecond(r.latencies.length, r.elapsedMs),
    latency: summarize(r.latencies),
  };
}

export async function measureActual(
  bench: BenchStack,
  concurrency: number,
  total: number,
): Promise<RunFigures> {
  return figures(concurrency, await measureActualRaw(bench, concurrency, total));
}

/** measureActual's latencies and wall time, for a caller that joins several runs into one figure. */
export async function measureActualRaw(
  bench: BenchStack,
  concurrency: number,
  total: number,
): Promise<{ latencies: number[]; elapsedMs: number }> {
  return closedLoop(concurrency, total, async () => {
    const { orderId, sentAt } = await submitOrder(bench.stack);
    const done = await bench.status.waitFor(orderId, 120_000);
    if (done.state !== 'Processed') throw new Error(`order ${orderId} ended ${done.state}`);
    return done.at - sentAt;
  });
}

/** Several runs at one concurrency as one: orders over the summed wall time, latencies pooled. */
export function joinRuns(
  concurrency: number,
  runs: ReadonlyArray<{ latencies: number[]; elapsedMs: number }>,
): RunFigures {
  return figures(concurrency, {
    latencies: runs.flatMap((r) => r.latencies),
    elapsedMs: runs.reduce((sum, r) => sum + r.elapsedMs, 0),
  });
}

/** The raw operations of one order, from part 1 (rounded to whole operations). */
export interface FloorRecipe {
  reads: number;
  queries: number;
  writes: number;
  batches: number;
  /** Sends that someone receives (queue hops): send, peek-lock receive, complete. */
  hops: number;
  /** Sends nobody in the app receives (status events to the topic). */
  publishOnly: number;
}

export function floorRecipe(cost: OrderCost): FloorRecipe {
  const hops = Math.round(Math.min(cost.serviceBus.receives, cost.serviceBus.settlements));
  return {
    reads: Math.round(cost.table.reads),
    queries: Math.round(cost.table.queries),
    writes: Math.round(cost.table.writes),
    batches: Math.round(cost.table.batches),
    hops,
    publishOnly: Math.max(0, Math.round(cost.serviceBus.sends) - hops),
  };
}

/** A queue and a topic the app never receives from: the floor's hops cannot disturb it. */
const floorQueue = 'operator-alerts';
const floorTopic = 'order-status';

export class Floor {
  private constructor(
    private readonly table: TableClient,
    private readonly client: ServiceBusClient,
    private readonly queueSender: ServiceBusSender,
    private readonly topicSender: ServiceBusSender,
    private readonly receivers: ServiceBusReceiver[],
  ) {}

  static async open(bench: BenchStack, concurrency: number): Promise<Floor> {
    const table = TableClient.fromConnectionString(bench.countedTables, 'BenchFloor', {
      allowInsecureConnection: true,
    });
    await table.createTable().catch(() => undefined);
    const client = new ServiceBusClient(bench.countedServiceBus);
    // Leftover alerts would be received by the floor's hops and skew nothing but the count; drain them.
    const drain = client.createReceiver(floorQueue, { receiveMode: 'receiveAndDelete' });
    while ((await drain.receiveMessages(100, { maxWaitTimeInMs: 500 })).length > 0);
    await drain.close();
    const receivers = Array.from({ length: concurrency }, () => client.createReceiver(floorQueue));
    return new Floor(
      table,
      client,
      client.createSender(floorQueue),
      client.createSender(floorTopic),
      receivers,
    );
  }

  /** One order's worth of raw operations, one after another like the order's critical path. */
  async order(recipe: FloorRecipe, worker: number): Promise<number> {
    const t0 = performance.now();
    const pk = randomUUID();
    const rows = ['order', 'state', 'step:0', 'step:1', 'step:2'].map((rowKey) => ({
      partitionKey: pk,
      rowKey,
      Data: 'x'.repeat(200),
    }));
    for (let i = 0; i < recipe.batches; i++) {
      const actions: TransactionAction[] = (i === 0 ? rows : rows.slice(1, 3)).map((r) => [
        'upsert',
        r,
        'Replace',
      ]);
      await this.table.submitTransaction(actions);
    }
    for (let i = 0; i < recipe.writes; i++)
      await this.table.upsertEntity({ partitionKey: 'idx', rowKey: pk, N: i }, 'Replace');
    for (let i = 0; i < recipe.reads; i++) await this.table.getEntity(pk, 'state');
    for (let i = 0; i < recipe.queries; i++) {
      for await (const _ of this.table.listEntities({ queryOptions: { filter: `PartitionKey eq '${pk}'` } }))
        void _;
    }
    const receiver = this.receivers[worker];
    for (let i = 0; i < recipe.hops; i++) {
      await this.queueSender.sendMessages({ messageId: randomUUID(), body: { floor: pk, i } });
      let got: Awaited<ReturnType<ServiceBusReceiver['receiveMessages']>> = [];
      while (got.length === 0) got = await receiver.receiveMessages(1, { maxWaitTimeInMs: 5000 });
      await receiver.completeMessage(got[0]);
    }
    for (let i = 0; i < recipe.publishOnly; i++)
      await this.topicSender.sendMessages({ messageId: randomUUID(), body: { floor: pk, i } });
    return performance.now() - t0;
  }

  async close(): Promise<void> {
    for (const r of this.receivers) await r.close();
    await this.queueSender.close();
    await this.topicSender.close();
    await this.client.close();
  }
}

export async function measureFloor(
  bench: BenchStack,
  recipe: FloorRecipe,
  concurrency: number,
  total: number,
): Promise<RunFigures> {
  const floor = await Floor.open(bench, concurrency);
  try {
    return figures(concurrency, await closedLoop(concurrency, total, (w) => floor.order(recipe, w)));
  } finally {
    await floor.close();
  }
}
