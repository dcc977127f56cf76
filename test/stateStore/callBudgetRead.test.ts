import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ClientRequest } from 'node:http';
import { after, before, test } from 'node:test';
import type { PipelinePolicy } from '@azure/core-rest-pipeline';
import { startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import { emptyBudgetRow } from '../../shared/domain/callBudget.js';
import { CallBudgetTable, leaseReadHedgeMs } from '../../shared/stateStore/callBudgetTable.js';
import { tableClient } from '../../shared/stateStore/clients.js';

/**
 * The lease row's read is what a renewal waits for, and a renewal that lands after the lease and
 * its grace lapses the grant. In the staged bench single reads from the hosts took 2-16 s while
 * a probe of the same row from another process answered in under 1 s: a second read sent after
 * `leaseReadHedgeMs` answers instead. Against Azurite; the hanging first request is a pipeline
 * policy (a real slow answer cannot be ordered here), and the test says so.
 */
let azurite: AzuriteInstance;
let table: CallBudgetTable;

before(async () => {
  azurite = await startAzurite({ services: ['table'] });
  table = await CallBudgetTable.open(
    { kind: 'connectionString', connectionString: azurite.connectionString },
    `Hedge${randomUUID().replace(/-/g, '').slice(0, 8)}`,
  );
});
after(async () => {
  await azurite.stop();
});

/** Holds the next `n` GETs of the table until aborted (or 20 s); counts GETs and aborts. */
function hangNextGets(n: number) {
  const seen = { gets: 0, aborted: 0 };
  let left = n;
  const policy: PipelinePolicy = {
    name: 'hangNextGets',
    async sendRequest(request, next) {
      if (request.method !== 'GET') return next(request);
      seen.gets += 1;
      if (left > 0) {
        left -= 1;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 20_000);
          request.abortSignal?.addEventListener('abort', () => {
            seen.aborted += 1;
            clearTimeout(timer);
            resolve();
          });
        });
      }
      return next(request);
    },
  };
  table.client.pipeline.addPolicy(policy, { afterPhase: 'Retry' });
  return { seen, remove: () => table.client.pipeline.removePolicy({ name: 'hangNextGets' }) };
}

test('a lease-row read whose request does not answer is answered by a second one sent after the hedge delay', async () => {
  const service = `s${randomUUID().slice(0, 8)}`;
  await table.update(service, (r) => ({ ...r, pausedUntil: 1234 }));
  const hang = hangNextGets(1);
  try {
    const started = performance.now();
    const read = await table.read(service);
    const ms = performance.now() - started;
    assert.equal(read.row.pausedUntil, 1234, 'the row as written');
    assert.ok(ms < leaseReadHedgeMs + 2_000, `answered after ${ms.toFixed(0)} ms (the first hung 20 s)`);
    assert.ok(
      ms >= leaseReadHedgeMs - 50,
      `the second read waited for the hedge delay (${ms.toFixed(0)} ms)`,
    );
    assert.equal(hang.seen.gets, 2, 'two reads');
    assert.equal(hang.seen.aborted, 1, 'the one still hanging is abandoned');
  } finally {
    hang.remove();
  }
});

test('a read that answers in time sends no second request; a missing row answers at once', async () => {
  const service = `s${randomUUID().slice(0, 8)}`;
  const count = hangNextGets(0);
  try {
    const started = performance.now();
    const missing = await table.read(service);
    assert.deepEqual(missing.row, { ...emptyBudgetRow, grants: [] });
    assert.equal(missing.etag, null);
    assert.ok(performance.now() - started < leaseReadHedgeMs, 'a 404 does not wait for the hedge');
    await table.update(service, (r) => ({ ...r, pausedUntil: 5 }));
    const gets = count.seen.gets;
    assert.equal((await table.read(service)).row.pausedUntil, 5);
    await new Promise((r) => setTimeout(r, leaseReadHedgeMs + 200));
    assert.equal(count.seen.gets, gets + 1, 'one read, no hedge after it answered');
  } finally {
    count.remove();
  }
});

test("the lease row's requests keep connections of their own: a burst of the process's other table requests does not make a renewal open one", async () => {
  // Staged bench (issue 26): a host starting made 32 table requests at once, and a renewal's read
  // opened a new connection beside them. Azurite (Node 24) accepts one new connection per turn of
  // its event loop; under load the read waited 6-20 s to be accepted, and the grant lapsed.
  const others = tableClient(
    { kind: 'connectionString', connectionString: azurite.connectionString },
    `Burst${randomUUID().replace(/-/g, '').slice(0, 8)}`,
  );
  await others.createTable();
  await table.read('warm');
  const reused: boolean[] = [];
  const onRequest = (message: unknown) => {
    const request = (message as { request: ClientRequest }).request;
    if (!request.path.includes(table.client.tableName)) return;
    request.once('response', () => reused.push(request.reusedSocket));
  };
  subscribe('http.client.request.start', onRequest);
  try {
    const burst = Array.from({ length: 10 }, (_, i) =>
      others.upsertEntity({ partitionKey: 'p', rowKey: String(i), n: i }),
    );
    await table.read('warm');
    await Promise.all(burst);
  } finally {
    unsubscribe('http.client.request.start', onRequest);
  }
  assert.deepEqual(reused, [true], 'the read went over the connection the lease table kept');
});
