import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { spawnLocalHost, startLocalHost, type LocalHost } from '../../local/host/index.js';
import { observations } from './fixtures/app/observations.js';
import { waitFor, writeFixtureApp } from './fixtureApp.js';

/**
 * The `retry` option: honoured on timer triggers (fixedDelay and exponentialBackoff, with the
 * retry context the handler sees in Azure), refused at start-up where Azure does not honour it.
 */
describe('local host: retry policies', () => {
  let host: LocalHost;
  const lines: string[] = [];

  before(async () => {
    host = await startLocalHost({
      appRoot: writeFixtureApp({ files: 'retryTimers.js' }),
      httpPort: 0,
      log: (line) => lines.push(line),
      shutdownGraceMs: 5_000,
    });
  });
  after(async () => {
    await host?.stop();
  });

  const runsOf = (name: string) => observations.filter((o) => o.functionName === name);

  it('retries a failing timer with a fixed delay until it succeeds, with the retry context', async () => {
    await waitFor('the third attempt to succeed', () => runsOf('flakyTimer').find((o) => o.outcome === 'ok'));
    const runs = runsOf('flakyTimer');
    assert.deepEqual(
      runs.map((r) => r.outcome),
      ['threw', 'threw', 'ok'],
    );
    const contexts = runs.map(
      (r) => r.input as { retryCount: number; maxRetryCount: number; exception?: { message?: string } },
    );
    assert.deepEqual(
      contexts.map((c) => [c.retryCount, c.maxRetryCount]),
      [
        [0, 4],
        [1, 4],
        [2, 4],
      ],
    );
    assert.equal(contexts[0].exception, undefined);
    assert.match(String(contexts[2].exception?.message), /flaky attempt 2/);
  });

  it('stops after maxRetryCount retries with exponential backoff and logs that it gave up', async () => {
    await waitFor('the retries to run out', () =>
      lines.some((l) => l.includes('brokenTimer') && l.includes('after 1 retries')) ? true : undefined,
    );
    assert.deepEqual(
      runsOf('brokenTimer').map((r) => (r.input as { retryCount: number }).retryCount),
      [0, 1],
    );
  });

  it('refuses a retry policy on a Service Bus trigger at start-up, naming the function and option', async () => {
    await assert.rejects(
      spawnLocalHost({
        appRoot: writeFixtureApp({ files: 'retryServiceBus.js' }),
        env: {
          ServiceBusConnection:
            'Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true',
        },
      }).then((h) => h.kill('SIGKILL')),
      /exited \(code 1[\s\S]*Function "retriedQueue": the retry option \(fixedDelay\) is not supported on serviceBusTrigger triggers/,
    );
  });
});
