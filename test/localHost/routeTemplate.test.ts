import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { comparePrecedence, matchRoute, parseRouteTemplate } from '../../local/host/routeTemplate.js';
import { parseSchedule } from '../../local/host/timerTrigger.js';
import { parseTimeSpan } from '../../local/host/settings.js';

const split = (path: string) => path.split('/').filter(Boolean);

describe('route templates', () => {
  it('matches parameters, optional parameters, constraints and catch-alls', () => {
    assert.deepEqual(matchRoute(parseRouteTemplate('orders/{id}'), split('Orders/42')), { id: '42' });
    assert.deepEqual(matchRoute(parseRouteTemplate('orders/{id?}'), split('orders')), {});
    const guid = parseRouteTemplate('orders/{id:guid}');
    assert.deepEqual(matchRoute(guid, split('orders/3f2504e0-4f89-11d3-9a0c-0305e82c3301')), {
      id: '3f2504e0-4f89-11d3-9a0c-0305e82c3301',
    });
    assert.equal(matchRoute(guid, split('orders/42')), undefined);
    assert.equal(matchRoute(parseRouteTemplate('n/{v:int}'), split('n/99999999999')), undefined);
    assert.deepEqual(matchRoute(parseRouteTemplate('files/{*path}'), split('files/a/b/c')), {
      path: 'a/b/c',
    });
    assert.equal(matchRoute(parseRouteTemplate('orders/{id}'), split('orders/1/extra')), undefined);
  });

  it('prefers literal segments over parameters', () => {
    const literal = parseRouteTemplate('orders/pending');
    const param = parseRouteTemplate('orders/{id}');
    assert.ok(comparePrecedence(literal, param) < 0);
  });

  it('rejects templates it cannot honour, with the template in the message', () => {
    assert.throws(() => parseRouteTemplate('orders/{id:regex(^a$)}'), /orders\/\{id:regex/);
    assert.throws(() => parseRouteTemplate('orders/{id?}/items'), /only trailing parameters can be optional/);
    assert.throws(() => parseRouteTemplate('a/{*rest}/b'), /catch-all must be the last segment/);
  });
});

describe('timer schedules', () => {
  it('reads six-field NCRONTAB in UTC', () => {
    const schedule = parseSchedule('0 30 9 * * 1-5', 'f');
    // Saturday 2024-06-01 → next weekday 09:30 is Monday 2024-06-03.
    assert.equal(
      schedule.nextAfter(new Date('2024-06-01T12:00:00Z')).toISOString(),
      '2024-06-03T09:30:00.000Z',
    );
  });

  it('requires day and day-of-week to match together, like NCrontab', () => {
    // The 13th that is a Friday: 2024-09-13.
    const schedule = parseSchedule('0 0 0 13 * 5', 'f');
    assert.equal(
      schedule.nextAfter(new Date('2024-06-01T00:00:00Z')).toISOString(),
      '2024-09-13T00:00:00.000Z',
    );
  });

  it('accepts TimeSpan intervals and rejects five-field cron', () => {
    assert.equal(parseSchedule('00:00:30', 'f').nextAfter(new Date(0)).getTime(), 30_000);
    assert.throws(() => parseSchedule('*/5 * * * *', 'f'), /must have six fields/);
    assert.throws(() => parseSchedule('x * * * * *', 'f'), /not a valid NCRONTAB/);
    assert.equal(parseTimeSpan('1.00:00:01.5', 'x'), 86_401_500);
  });
});
