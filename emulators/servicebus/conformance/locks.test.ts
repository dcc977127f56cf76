import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ServiceBusClient } from '@azure/service-bus';
import {
  newClient,
  openNamespace,
  purge,
  receiveAtLeast,
  sleep,
  uniqueId,
  type Namespace,
} from './harness.js';

const queue = 'conf-lock'; // LockDuration PT5S
const lockMs = 5_000;
// The SDK renews locks automatically by default; these tests need the locks to lapse.
const noAutoRenew = { maxAutoLockRenewalDurationInMs: 0 };

describe('message locks', () => {
  let ns: Namespace;
  let client: ServiceBusClient;

  before(async () => {
    ns = await openNamespace();
    client = newClient(ns);
    const r = client.createReceiver(queue, { receiveMode: 'receiveAndDelete' });
    await purge(client, r);
    await r.close();
  });

  after(async () => {
    await client.close();
    await ns.close();
  });

  it('redelivers after lock expiry with the delivery count incremented, and the old lock is lost', async () => {
    const sender = client.createSender(queue);
    const id = uniqueId('expiry');
    await sender.sendMessages({ body: 'slow', messageId: id });
    await sender.close();
    const receiver = client.createReceiver(queue, noAutoRenew);
    const [first] = await receiveAtLeast(receiver, 1);
    assert.equal(first.deliveryCount, 0);
    const lockedFor = first.lockedUntilUtc!.getTime() - first.enqueuedTimeUtc!.getTime();
    assert.ok(lockedFor > 0 && lockedFor <= lockMs + 2_000, `lock follows LockDuration (${lockedFor} ms)`);
    // While locked, nobody else gets it.
    assert.equal((await receiver.receiveMessages(1, { maxWaitTimeInMs: 1_000 })).length, 0);
    const [second] = await receiveAtLeast(receiver, 1, lockMs * 4);
    assert.equal(second.messageId, id);
    assert.equal(second.deliveryCount, 1);
    assert.notEqual(second.lockToken, first.lockToken);
    await assert.rejects(receiver.completeMessage(first), (err: { code?: string }) => {
      assert.equal(err.code, 'MessageLockLost');
      return true;
    });
    await receiver.completeMessage(second);
    await receiver.close();
  });

  it('renews a lock so the message is not redelivered, and renewal moves lockedUntil forward', async () => {
    const sender = client.createSender(queue);
    const id = uniqueId('renew');
    await sender.sendMessages({ body: 'renew', messageId: id });
    await sender.close();
    const receiver = client.createReceiver(queue, noAutoRenew);
    const [m] = await receiveAtLeast(receiver, 1);
    const before = m.lockedUntilUtc!.getTime();
    await sleep(1_500);
    const renewed = await receiver.renewMessageLock(m);
    assert.ok(renewed.getTime() > before, 'lockedUntil moved forward');
    await sleep(2_000);
    await receiver.renewMessageLock(m);
    await sleep(2_000);
    // More than LockDuration since receipt: without the renewals the lock would be gone.
    assert.equal((await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 })).length, 0, 'still locked');
    await receiver.completeMessage(m);
    await receiver.close();
  });

  it('makes a message available again after its lock expires when the receiving connection drops', async () => {
    const sender = client.createSender(queue);
    const id = uniqueId('drop');
    await sender.sendMessages({ body: 'orphan', messageId: id });
    await sender.close();
    const doomed = newClient(ns);
    // The SDK renews locks on its own while the client lives; the drop ends that too.
    const doomedReceiver = doomed.createReceiver(queue);
    const [m] = await receiveAtLeast(doomedReceiver, 1);
    assert.equal(m.messageId, id);
    await doomed.close(); // connection gone, message never settled
    const receiver = client.createReceiver(queue, noAutoRenew);
    const [again] = await receiveAtLeast(receiver, 1, lockMs * 4);
    assert.equal(again.messageId, id);
    assert.equal(again.deliveryCount, 1);
    await receiver.completeMessage(again);
    await receiver.close();
  });

  it('fails renew and settlement of an expired lock with MessageLockLost', async () => {
    const sender = client.createSender(queue);
    await sender.sendMessages({ body: 'lost', messageId: uniqueId('lost') });
    await sender.close();
    const receiver = client.createReceiver(queue, noAutoRenew);
    const [m] = await receiveAtLeast(receiver, 1);
    await sleep(lockMs + 1_500);
    await assert.rejects(receiver.renewMessageLock(m), (err: { code?: string }) => {
      assert.equal(err.code, 'MessageLockLost');
      return true;
    });
    await assert.rejects(receiver.abandonMessage(m), (err: { code?: string }) => {
      assert.equal(err.code, 'MessageLockLost');
      return true;
    });
    const [again] = await receiveAtLeast(receiver, 1);
    await receiver.completeMessage(again);
    await receiver.close();
  });
});
