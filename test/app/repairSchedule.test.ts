import assert from 'node:assert/strict';
import { after, before, describe, it, mock } from 'node:test';
import { InvocationContext, type Timer } from '@azure/functions';
import { startAzurite, type AzuriteInstance } from '../../local/azurite.js';
import { orderWorkflow, orderWorkflowVersions, ManualClock } from '../../shared/domain/index.js';
import { resetSettingsCache, serviceUrlSetting } from '../../shared/config/settings.js';
import { InFlightIndex, StateStore } from '../../shared/stateStore/index.js';
import { indexHas } from '../stateStore/harness.js';
import { submitted, testPolicy, type TestDeps } from './direct.js';

/**
 * The production Supervisor function (functions/supervisor.ts) as the timer calls it, on the
 * system clock, with the process's Date set to each run's time: whether the index repair passes
 * start is decided by that function, whatever the schedule's minutes. Runs are days in the past,
 * so no order's complete-by has passed and the sweep itself has nothing to act on.
 */
describe('the repair passes as the Supervisor function schedules them', () => {
  let azurite: AzuriteInstance;
  let store: StateStore;
  let supervisor: (timer: Timer, context: InvocationContext) => Promise<void>;
  const saved = { ...process.env };

  before(async () => {
    azurite = await startAzurite({ services: ['table'] });
    process.env.StateStoreConnection = azurite.connectionString;
    // Tables only here: no blob service to archive to.
    process.env.ORDER_ARCHIVE = 'off';
    // Never reached: a sweep with nothing overdue sends and peeks nothing.
    process.env.ServiceBusConnection =
      'Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;';
    for (const s of orderWorkflow.steps) process.env[serviceUrlSetting(s.agent)] = 'http://127.0.0.1:9';
    resetSettingsCache();
    ({ supervisor } = await import('../../functions/supervisor.js'));
    store = await StateStore.open({ kind: 'connectionString', connectionString: azurite.connectionString });
  });
  after(async () => {
    mock.timers.reset();
    process.env = saved;
    resetSettingsCache();
    await azurite?.stop();
  });

  const deps = (): TestDeps =>
    ({
      store,
      clock: new ManualClock(new Date()),
      policy: testPolicy,
      workflows: orderWorkflowVersions,
    }) as TestDeps;
  /** A UTC midnight at least two days ago: every run below is in the past. */
  const day = new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000 - 2 * 86_400_000);
  const at = (hours: number, minutes: number, seconds = 0) =>
    new Date(day.getTime() + ((hours * 60 + minutes) * 60 + seconds) * 1000);
  /** One timer firing at `when`, with the process's clock there for the run. */
  async function run(when: Date): Promise<void> {
    mock.timers.enable({ apis: ['Date'], now: when });
    try {
      await supervisor({ isPastDue: false } as Timer, new InvocationContext({ functionName: 'supervisor' }));
    } finally {
      mock.timers.reset();
    }
  }
  /** Every entity of the state index: a lost table, which only the daily full pass rebuilds. */
  async function wipeStateIndex(): Promise<void> {
    for await (const e of store.stateIndex.table.listEntities())
      await store.stateIndex.table.deleteEntity(e.partitionKey!, e.rowKey!);
  }
  const listedPending = async () =>
    (await store.listOrders({ state: 'Pending' }, undefined, 100)).items.map((o) => o.orderId);

  it('the 03:00 full pass runs although an hourly pass is under way then', async () => {
    const orderId = await submitted(deps());
    await wipeStateIndex();
    // An hourly pass started at 02:00 is still under way (a table large enough to span runs); the
    // last full pass was yesterday's. The pass times are what the fixed Supervisor keeps with the cursor.
    await store.index.table.upsertEntity(
      {
        partitionKey: 'reconcile',
        rowKey: 'cursor',
        Stage: 'orders',
        Token: '',
        Full: false,
        HourlyStartedAt: at(2, 0, 5),
        FullStartedAt: at(-21, 0, 5),
      },
      'Replace',
    );
    await run(at(3, 0, 30));
    for (let m = 1; m <= 90; m++) await run(at(3, m, 30));
    assert.ok(
      (await listedPending()).includes(orderId),
      'the state index was not rebuilt: no full pass ran from 03:00 to 04:30',
    );
  });

  it('a schedule on odd minutes (every 2 minutes from :01) still starts the hourly pass', async () => {
    const orderId = await submitted(deps());
    for (let m = 1; m < 60; m += 2) await run(at(5, m));
    // The in-flight index row is lost: only a repair pass brings it back.
    await store.index.table.deleteEntity(InFlightIndex.partitionFor(orderId), orderId);
    for (let m = 1; m < 60; m += 2) await run(at(6, m));
    assert.equal(await indexHas(store.index, orderId), true, 'no repair pass ran between 06:00 and 07:00');
  });
});
