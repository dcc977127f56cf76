import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { InFlightIndex, StateStore, stateRowKey } from '../../shared/stateStore/index.js';
import { runSupervisor } from '../../shared/supervisor/supervisor.js';
import { orderIn } from '../retention/harness.js';
import { indexHas } from '../stateStore/harness.js';
import { context, freshDeps, startInfra, type Infra, type TestDeps } from './direct.js';

/**
 * Issue 24 item 6: the repair passes stop growing with history. The hourly pass reads every state
 * row only until every row carries the state index's marker (StateSince); after that it repairs
 * the in-flight index from the index's in-flight entries (O(in-flight)). The daily full pass still
 * reads every retained order.
 */
describe('the hourly backfill ends once every row carries the marker', () => {
  let infra: Infra;
  before(async () => {
    infra = await startInfra();
  });
  after(async () => {
    await infra?.stop();
  });

  const terminal = 24;

  async function depsWithHistory(): Promise<{ deps: TestDeps; live: string[]; all: number }> {
    const base = await freshDeps(infra);
    const suffix = randomUUID().replace(/-/g, '').slice(0, 10);
    const store = await StateStore.open(
      { kind: 'connectionString', connectionString: infra.azurite.connectionString },
      {
        ordersTable: `Orders${suffix}`,
        inFlightTable: `InFlight${suffix}`,
        stateIndexTable: `Index${suffix}`,
      },
    );
    const deps: TestDeps = { ...base, store };
    const at = new Date(Date.now() - 86_400_000);
    for (let i = 0; i < terminal; i++) await orderIn(store, 'Processed', at);
    const live: string[] = [];
    // Deadlines far ahead: the sweep has nothing to act on.
    for (let i = 0; i < 3; i++)
      live.push((await orderIn(store, 'Pending', new Date(Date.now() + 3_600_000))).state.orderId);
    return { deps, live, all: terminal + live.length };
  }

  /** One whole hourly (or full) pass, requested now and carried on until through; the entities it read. */
  async function pass(deps: TestDeps, kind: true | 'full' = true) {
    deps.store.metrics.reset();
    const options = { reconcilePageSize: 1000 };
    const report = await runSupervisor(deps, context('supervisor'), { reconcile: kind, ...options });
    for (let run = 0; run < 20 && (await deps.store.index.repairs.read()).cursor !== null; run++) {
      const more = await runSupervisor(deps, context('supervisor'), options);
      report.reconciled = (report.reconciled ?? 0) + (more.reconciled ?? 0);
    }
    assert.equal((await deps.store.index.repairs.read()).cursor, null, 'the pass is through');
    return { read: deps.store.metrics.entitiesRead, report };
  }

  it('the first hourly pass reads every state row; the next reads the in-flight entries only, and still repairs a lost in-flight row', async () => {
    const { deps, live, all } = await depsWithHistory();
    const first = await pass(deps);
    assert.ok(first.read >= all, `the first pass read ${first.read} entities, ${all} state rows`);
    const second = await pass(deps);
    assert.ok(
      second.read < terminal,
      `an hourly pass after the backfill read ${second.read} entities (${terminal} terminal orders)`,
    );
    // An in-flight row lost (a bug, a manual edit): the hourly pass still brings it back.
    await deps.store.index.table.deleteEntity(InFlightIndex.partitionFor(live[0]), live[0]);
    const third = await pass(deps);
    assert.equal(third.report.reconciled, 1);
    assert.equal(await indexHas(deps.store.index, live[0]), true);
    assert.ok(third.read < terminal, `read ${third.read}`);
    // The daily full pass covers every retained order.
    const full = await pass(deps, 'full');
    assert.ok(full.read >= all, `the full pass read ${full.read}`);
  });

  it('a row without the marker keeps the hourly pass reading every row until a pass finds none', async () => {
    const { deps, all } = await depsWithHistory();
    await pass(deps);
    // A row as a release before the state index wrote it (no StateSince).
    let row: Record<string, unknown> | undefined;
    for await (const r of deps.store.orders.listEntities<Record<string, unknown>>({
      queryOptions: { filter: `RowKey eq '${stateRowKey}' and ProcessState eq 'Processed'` },
    })) {
      row = r;
      break;
    }
    assert.ok(row);
    const { StateSince: _since, etag: _etag, timestamp: _ts, ...legacy } = row;
    await deps.store.orders.updateEntity(legacy as never, 'Replace');
    // The full pass reads it (and enters it, writing the marker), so the next hourly pass does too.
    const full = await pass(deps, 'full');
    assert.ok(full.read >= all);
    const afterLegacy = await pass(deps);
    assert.ok(afterLegacy.read >= all, `a pass after a legacy row was seen read ${afterLegacy.read}`);
    const backfilled = await pass(deps);
    assert.ok(backfilled.read < terminal, `read ${backfilled.read}`);
  });
});
