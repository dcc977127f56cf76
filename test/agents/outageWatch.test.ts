import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ServiceOutageWatch } from '../../shared/agents/outageWatch.js';
import { ManualClock } from '../../shared/domain/index.js';
import { logger } from '../../shared/observability/logger.js';
import { queues } from '../../shared/messaging/entities.js';
import { ServiceHealthTable } from '../../shared/stateStore/serviceHealthTable.js';
import { held, startInfra, type Infra } from '../app/direct.js';

/**
 * One alert per outage, against Azurite (the ETag-guarded health row) and the broker (the
 * operator-alerts queue). Each watch stands for one Agent process; several share one row.
 */
describe('service outage alerts', () => {
  let infra: Infra;
  let table: ServiceHealthTable;
  const clock = new ManualClock(new Date());

  before(async () => {
    infra = await startInfra();
    table = await ServiceHealthTable.open(
      { kind: 'connectionString', connectionString: infra.azurite.connectionString },
      `Health${randomUUID().replace(/-/g, '').slice(0, 8)}`,
    );
  });
  after(async () => {
    await infra?.stop();
  });

  const watch = (threshold = 3) =>
    new ServiceOutageWatch(table, infra.bus, clock, { threshold, recheckMs: 0 });
  const alertsFor = (service: string) => held(infra, queues.operatorAlerts, `service:${service}`);

  it('alerts once when the streak reaches the threshold, naming service, status and detail', async () => {
    const service = `svc-${randomUUID().slice(0, 8)}`;
    const w = watch(3);
    // The invocation's log: the alert's second channel is its error line (alerts.bicep queries it).
    const lines: Array<{ level: string; line: Record<string, unknown> }> = [];
    const sink = (level: string) => (text: unknown) => lines.push({ level, line: JSON.parse(String(text)) });
    const log = logger({ info: sink('info'), warn: sink('warn'), error: sink('error') });
    await w.failed(service, { status: 401, detail: 'Unauthorized: key revoked' }, log);
    await w.failed(service, { status: 401, detail: 'Unauthorized: key revoked' }, log);
    assert.equal((await alertsFor(service)).length, 0, 'below the threshold: no alert');
    await w.failed(service, { status: 401, detail: 'Unauthorized: key revoked' }, log);
    for (let i = 0; i < 5; i++)
      await w.failed(service, { status: 401, detail: 'Unauthorized: key revoked' }, log);
    const alertLines = lines.filter((l) => l.line.msg === 'operator alert');
    assert.equal(alertLines.length, 1, 'one alert line for the whole outage');
    assert.equal(alertLines[0].level, 'error');
    assert.equal(alertLines[0].line.orderId, `service:${service}`);
    assert.equal(alertLines[0].line.code, 'ServiceOutage');
    assert.equal(alertLines[0].line.status, 401);
    const alerts = await alertsFor(service);
    assert.equal(alerts.length, 1, 'one alert for the whole outage');
    assert.equal(alerts[0].body.service, service);
    assert.equal(alerts[0].body.status, 401);
    assert.match(alerts[0].body.reason, /key revoked/);
    const row = await table.read(service);
    assert.equal(row?.health.consecutiveFailures, 8);
    assert.equal(row?.health.alertSent, true);
  });

  it('an answer closes the outage; the next outage alerts again; a short streak never alerts', async () => {
    const service = `svc-${randomUUID().slice(0, 8)}`;
    const w = watch(2);
    await w.failed(service, { status: 503, detail: 'a' });
    await w.answered(service);
    await w.failed(service, { status: 503, detail: 'b' });
    assert.equal((await alertsFor(service)).length, 0, 'the answer reset the streak');
    await w.failed(service, { status: 503, detail: 'c' });
    assert.equal((await alertsFor(service)).length, 1);
    await w.answered(service);
    assert.equal((await table.read(service))?.health.open, false);
    await w.failed(service, { status: 403, detail: 'd' });
    await w.failed(service, { status: 403, detail: 'e' });
    const alerts = await alertsFor(service);
    assert.deepEqual(alerts.map((a) => a.body.status).sort(), [403, 503], 'a second outage, a second alert');
  });

  it('concurrent Agents count every failure and alert exactly once', async () => {
    const service = `svc-${randomUUID().slice(0, 8)}`;
    const agents = Array.from({ length: 6 }, () => watch(4));
    await Promise.all(
      agents.flatMap((w, i) =>
        Array.from({ length: 3 }, (_, j) =>
          w.failed(service, { status: 401, detail: `agent ${i} call ${j}` }),
        ),
      ),
    );
    assert.equal((await table.read(service))?.health.consecutiveFailures, 18, 'no count lost to a race');
    assert.equal((await alertsFor(service)).length, 1);
  });

  it('an Agent that saw no failure closes an outage left open by others (after its recheck)', async () => {
    const service = `svc-${randomUUID().slice(0, 8)}`;
    await watch(1).failed(service, { status: 401, detail: 'x' });
    assert.equal((await table.read(service))?.health.open, true);
    await watch(1).answered(service);
    assert.equal((await table.read(service))?.health.open, false);
  });
});
