import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HttpRequest } from '@azure/functions';
import type { Dependencies } from '../../shared/app/ports.js';
import { ManualClock, orderWorkflowVersions } from '../../shared/domain/index.js';
import { getOrder } from '../../shared/http/orderApi.js';
import type { MessageBus } from '../../shared/messaging/bus.js';
import { behindPlatformAuth, principalHeaders } from '../http/principal.js';
import { policy } from '../stateStore/harness.js';
import { daysAfter, orderIn, retentionAzurite, withRetention } from './harness.js';

/**
 * A purged order whose day blob the lifecycle rule moved to the archive tier cannot be read until
 * it is rehydrated (hours). Azurite keeps blob tiers and answers a read of an archived blob as
 * Azure does (409 BlobArchived), so this runs against it: the operator's GET says the archive is
 * offline and how to bring it back, as problem+json, never 500.
 */
const azurite = retentionAzurite();

const t0 = new Date('2030-01-01T00:00:00.000Z');
const noBus = {} as MessageBus;

test("an operator's GET of a purged order whose archive blob is in the archive tier answers 409 archive-offline naming the rehydration, then the document once rehydrated", async () => {
  const { store, retention } = await withRetention(azurite());
  const o = await orderIn(store, 'Processed', t0);
  const orderId = o.order.orderId;
  assert.equal((await retention.purgeNow(daysAfter(t0, 100), 10)).purged, 1);
  const purged = (await retention.purged(orderId))!;
  const blob = retention.archive!.container.getBlockBlobClient(purged.archiveBlob!);
  await blob.setAccessTier('Archive');
  const deps: Dependencies = {
    store,
    bus: noBus,
    clock: new ManualClock(daysAfter(t0, 300)),
    policy,
    workflows: orderWorkflowVersions,
    retention,
  };
  const get = () =>
    behindPlatformAuth(() =>
      getOrder(
        deps,
        new HttpRequest({
          method: 'GET',
          url: `http://127.0.0.1/api/orders/${orderId}`,
          headers: principalHeaders(),
          params: { orderId },
        }),
      ),
    );
  const offline = await get();
  assert.equal(offline.status, 409, String(offline.body));
  assert.equal((offline.headers as Record<string, string>)['Content-Type'], 'application/problem+json');
  const problem = JSON.parse(String(offline.body)) as { type: string; detail: string; archive: string };
  assert.match(problem.type, /archive-offline$/);
  assert.equal(problem.archive, `order-archive/${purged.archiveBlob}`);
  assert.match(problem.detail, /az storage blob set-tier .*--rehydrate-priority/);
  // Rehydrated (Azurite moves it at once; Azure takes hours): the document again.
  await blob.setAccessTier('Cool', { rehydratePriority: 'Standard' });
  const back = await get();
  assert.equal(back.status, 200);
  assert.equal((back.jsonBody as { archived: boolean }).archived, true);
});
