import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startLocalHost, type LocalHost } from '../../local/host/index.js';
import { observations } from './fixtures/app/observations.js';
import { waitFor, writeFixtureApp } from './fixtureApp.js';

describe('local host: timer triggers', () => {
  let host: LocalHost;
  const lines: string[] = [];

  before(async () => {
    const appRoot = writeFixtureApp({ files: 'timerFunctions.js' });
    host = await startLocalHost({
      appRoot,
      httpPort: 0,
      // The schedule comes from an app setting (`schedule: '%SLOW_TIMER_SCHEDULE%'`): every second.
      env: { SLOW_TIMER_SCHEDULE: '*/1 * * * * *', SLOW_TIMER_MS: '1500' },
      log: (line) => lines.push(line),
      shutdownGraceMs: 10_000,
    });
  });
  after(async () => {
    await host?.stop();
  });

  it('resolves %SETTING% schedules from the app settings', () => {
    const slow = host.functions.find((f) => f.name === 'slowTimer');
    assert.deepEqual(slow, { name: 'slowTimer', trigger: 'timer', detail: '*/1 * * * * *' });
  });

  it('runs a runOnStartup timer at start-up with a Timer object', async () => {
    const run = await waitFor('the start-up run', () =>
      observations.find((o) => o.functionName === 'startupTimer'),
    );
    const timer = run.input as { isPastDue: unknown; scheduleStatus?: { next?: string }; schedule?: unknown };
    assert.equal(timer.isPastDue, false);
    assert.ok(timer.scheduleStatus?.next, 'scheduleStatus.next');
    // The next occurrence of '0 0 0 1 1 *' is midnight UTC on January 1st.
    assert.match(timer.scheduleStatus.next, /^\d{4}-01-01T00:00:00\.000Z$/);
    assert.deepEqual(timer.schedule, { adjustForDST: true });
    assert.equal(run.triggerMetadata, undefined);
  });

  it('never overlaps a slow timer with itself', async () => {
    // Each run takes 1.5 s on a 1 s schedule: overlapping runs would start before the previous ended.
    await waitFor('three finished slow runs', () => {
      const finished = observations.filter(
        (o) => o.functionName === 'slowTimer' && o.finishedAt !== undefined,
      );
      return finished.length >= 3 ? finished : undefined;
    });
    const runs = observations.filter((o) => o.functionName === 'slowTimer');
    for (let i = 1; i < runs.length; i++) {
      const previousEnd = runs[i - 1].finishedAt;
      assert.ok(
        previousEnd !== undefined && runs[i].startedAt >= previousEnd,
        `run ${i} started before run ${i - 1} ended`,
      );
    }
    for (const run of runs) assert.equal(typeof (run.input as { isPastDue: unknown }).isPastDue, 'boolean');
  });
});
