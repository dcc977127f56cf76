import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AzureLogger, getLogLevel, setLogLevel, type AzureLogLevel } from '@azure/logger';
import type { ServiceBusClient } from '@azure/service-bus';
import {
  newClient,
  openNamespace,
  purgeQueues,
  receiveAtLeast,
  uniqueId,
  type Namespace,
} from './harness.js';

const queue = 'conf-sdk-drain';

/**
 * When receiveMessages times out, the SDK drains the link's remaining credit and waits for the
 * broker's drain reply; without one it logs a warning and closes its link. With
 * maxWaitTimeInMs 0 the drain request leaves before the SDK has read the transfers the
 * broker is already sending, so it reaches the broker after they used up the credit: the case
 * where a broker must still answer.
 */
describe('drain: a drain that crosses in-flight transfers is answered', () => {
  let ns: Namespace;
  let client: ServiceBusClient;
  let previousLevel: AzureLogLevel | undefined;
  let previousLog: typeof AzureLogger.log;
  const warnings: string[] = [];

  before(async () => {
    previousLevel = getLogLevel();
    previousLog = AzureLogger.log;
    setLogLevel('warning');
    // The SDK's own report that the broker never answered a drain.
    AzureLogger.log = (...args: unknown[]) => warnings.push(args.map(String).join(' '));
    ns = await openNamespace();
    client = newClient(ns);
    await purgeQueues(client, [queue]);
  });

  after(async () => {
    await client.close();
    await ns.close();
    AzureLogger.log = previousLog;
    setLogLevel(previousLevel);
  });

  it('gets every message and a drain reply, so the SDK keeps its link (peek-lock and receive-and-delete)', async () => {
    const sender = client.createSender(queue);
    for (const receiveMode of ['peekLock', 'receiveAndDelete'] as const) {
      const receiver = client.createReceiver(queue, { receiveMode });
      // Attach on the empty queue first: the timed calls below start on an open link.
      assert.equal((await receiver.receiveMessages(1, { maxWaitTimeInMs: 100 })).length, 0);
      for (let round = 0; round < 3; round++) {
        const run = uniqueId(`drain-${receiveMode}-${round}`);
        await sender.sendMessages(
          Array.from({ length: 5 }, (_, i) => ({ body: i, messageId: `${run}-${i}` })),
        );
        const got = [...(await receiver.receiveMessages(5, { maxWaitTimeInMs: 0 }))];
        if (got.length < 5) got.push(...(await receiveAtLeast(receiver, 5 - got.length)));
        assert.deepEqual(got.map((m) => m.body).sort(), [0, 1, 2, 3, 4]);
        for (const m of got) {
          assert.equal(m.deliveryCount, 0, 'nothing was released by a closed link');
          if (receiveMode === 'peekLock') await receiver.completeMessage(m);
        }
      }
      await receiver.close();
    }
    await sender.close();
    const drainTimeouts = warnings.filter((w) => /draining credits/i.test(w));
    assert.deepEqual(drainTimeouts, [], 'the SDK never waited in vain for a drain reply');
  });
});
