import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient } from '@azure/service-bus';
import { startServiceBusEmulator, type ServiceBusEmulator } from '../../emulators/servicebus/index.js';
import { ServiceBusMessageBus } from '../../shared/messaging/bus.js';
import { queues } from '../../shared/messaging/entities.js';
import { peekAll } from '../app/helpers.js';
import { repoRoot } from '../app/direct.js';

/**
 * Service Bus throttling: the emulator refuses each message's first sends with
 * `com.microsoft:server-busy`, as a namespace over its quota does. The app's bus must retry with
 * back-off until the message is in, and never hand the error to the Scheduler or the Agent.
 */
describe('the message bus under Service Bus throttling', () => {
  let emulator: ServiceBusEmulator;
  const refusedPerMessage = 4;
  const refusals = new Map<string, number>();

  before(async () => {
    emulator = await startServiceBusEmulator({
      config: join(repoRoot, 'infra', 'servicebus-emulator', 'Config.json'),
      port: 0,
      refuseSend: (entity, messageId) => {
        if (entity !== queues.operatorAlerts || messageId === undefined) return false;
        const n = refusals.get(messageId) ?? 0;
        if (n >= refusedPerMessage) return false;
        refusals.set(messageId, n + 1);
        return true;
      },
    });
  });
  after(async () => {
    await emulator?.stop();
  });

  it(`a send refused ${refusedPerMessage} times in a row as ServerBusy still gets through`, async () => {
    const bus = ServiceBusMessageBus.fromConnection({
      kind: 'connectionString',
      connectionString: emulator.connectionString,
    });
    const ids = Array.from({ length: 10 }, (_, i) => `throttled-${i}`);
    try {
      await Promise.all(
        ids.map((messageId) => bus.send(queues.operatorAlerts, [{ messageId, body: { n: messageId } }])),
      );
    } finally {
      await bus.close();
    }
    assert.deepEqual(
      ids.map((id) => refusals.get(id)),
      ids.map(() => refusedPerMessage),
      'every message was refused before it got in',
    );
    const client = new ServiceBusClient(emulator.connectionString);
    try {
      const held = await peekAll(client, queues.operatorAlerts);
      assert.deepEqual(held.map((m) => m.messageId).sort(), [...ids].sort());
    } finally {
      await client.close();
    }
  });
});
