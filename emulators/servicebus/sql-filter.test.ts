import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Message } from 'rhea';
import { applySqlAction, parseSqlAction, parseSqlFilter, sqlMatches, SqlError } from './sql-filter.js';

function msg(props: Record<string, unknown> = {}, sys: Partial<Message> = {}): Message {
  return { body: 'b', application_properties: props, ...sys } as Message;
}

const matches = (expr: string, m: Message): boolean => sqlMatches(parseSqlFilter(expr), m);

describe('SQL filter: grammar and three-valued evaluation', () => {
  it('compares numbers, strings and booleans', () => {
    const m = msg({ quantity: 12, price: 2.5, region: 'eu-west', vip: true });
    assert.equal(matches('quantity > 10', m), true);
    assert.equal(matches('quantity >= 12 AND quantity <= 12', m), true);
    assert.equal(matches('quantity < 12', m), false);
    assert.equal(matches('quantity <> 12', m), false);
    assert.equal(matches('quantity != 13', m), true);
    assert.equal(matches('price * 4 = 10', m), true);
    assert.equal(matches('(quantity + 3) % 5 = 0', m), true);
    assert.equal(matches('-quantity < 0', m), true);
    assert.equal(matches("region = 'eu-west'", m), true);
    assert.equal(matches("region = 'EU-WEST'", m), false, 'string comparison is exact');
    assert.equal(matches('vip = TRUE', m), true);
    assert.equal(matches('vip', m), true, 'a boolean property is a predicate');
    assert.equal(matches("quantity = '12'", m), false, 'different types never compare equal');
  });

  it('combines with AND, OR, NOT and parentheses, AND binding tighter than OR', () => {
    const m = msg({ a: 1, b: 2 });
    assert.equal(matches('a = 1 OR a = 2 AND b = 3', m), true);
    assert.equal(matches('(a = 1 OR a = 2) AND b = 3', m), false);
    assert.equal(matches('NOT a = 2', m), true);
    assert.equal(matches('NOT (a = 1 AND b = 2)', m), false);
    assert.equal(matches('1=1', m), true);
    assert.equal(matches('1 = 0', m), false);
  });

  it('treats a missing user property as unknown: neither it nor its negation matches', () => {
    const m = msg({ a: 1 });
    assert.equal(matches('missing = 1', m), false);
    assert.equal(matches('NOT missing = 1', m), false);
    assert.equal(matches('missing = 1 OR a = 1', m), true);
    assert.equal(matches('missing = 1 AND a = 1', m), false);
    assert.equal(matches('NOT (missing = 1 AND a = 2)', m), true, 'unknown AND false is false');
  });

  it('supports IS [NOT] NULL and EXISTS on user and system properties', () => {
    const m = msg({ tenant: 'alpha', cleared: null }, { correlation_id: 'c-1' });
    assert.equal(matches('discount IS NULL', m), true);
    assert.equal(matches('cleared IS NULL', m), true);
    assert.equal(matches('tenant IS NOT NULL', m), true);
    assert.equal(matches('EXISTS(tenant)', m), true);
    assert.equal(matches('EXISTS(cleared)', m), true, 'a property set to null exists');
    assert.equal(matches('EXISTS(discount)', m), false);
    assert.equal(matches('NOT EXISTS(discount)', m), true);
    assert.equal(matches('EXISTS(sys.CorrelationId)', m), true);
    assert.equal(matches('sys.ReplyTo IS NULL', m), true);
  });

  it('supports [NOT] IN lists', () => {
    const m = msg({ priority: 'high', n: 3 });
    assert.equal(matches("priority IN ('high', 'urgent')", m), true);
    assert.equal(matches("priority NOT IN ('high', 'urgent')", m), false);
    assert.equal(matches('n IN (1, 2, 3)', m), true);
    assert.equal(matches("missing IN ('x')", m), false);
    assert.equal(matches("missing NOT IN ('x')", m), false, 'unknown stays unknown');
  });

  it('supports [NOT] LIKE with % and _ and an ESCAPE character', () => {
    const m = msg({ event: 'Inventory.Created', code: 'A_1', path: '50%' });
    assert.equal(matches("event LIKE 'Inventory%'", m), true);
    assert.equal(matches("event LIKE 'inventory%'", m), false);
    assert.equal(matches("event NOT LIKE 'Order%'", m), true);
    assert.equal(matches("code LIKE 'A__'", m), true);
    assert.equal(matches("code LIKE 'A!_1' ESCAPE '!'", m), true);
    assert.equal(matches("code LIKE 'AB1' ", m), false);
    assert.equal(matches("path LIKE '50!%' ESCAPE '!'", m), true);
    assert.equal(matches("event LIKE 'Inv.ntory%'", m), false, 'regular expression characters are literal');
  });

  it('reads system properties with sys. and user properties with or without user.', () => {
    const m = msg(
      { userProp1: 'value1', 'data-topic': 'x' },
      { message_id: '123456', subject: 'order-created', to: 't', content_type: 'application/json' },
    );
    assert.equal(matches("sys.MessageId = '123456' AND userProp1 = 'value1'", m), true);
    assert.equal(matches("sys.Label = 'order-created' AND sys.Subject = 'order-created'", m), true);
    assert.equal(matches("sys.ContentType LIKE 'application/%'", m), true);
    assert.equal(matches("user.userProp1 = 'value1'", m), true);
    assert.equal(matches('[data-topic] IS NOT NULL', m), true);
    assert.equal(matches("SYS.to = 't'", m), true, 'keywords and scopes ignore case');
    assert.equal(matches('"userProp1" = \'value1\'', m), true);
  });

  it('refuses bad expressions with the position of the problem', () => {
    const bad: Array<[string, RegExp]> = [
      ["a = 'b' AND", /expected a value or a property at the end/],
      ["a = 'unterminated", /unterminated string/],
      ['a = 1 b = 2', /unexpected input at position 7/],
      ['sys.Nope = 1', /sys.Nope is not a system property/],
      ['a LIKE b', /LIKE needs a string pattern/],
      ["a LIKE 'x' ESCAPE 'ab'", /one-character/],
      ['a IN ()', /expected a value/],
      ['upper(a) = 1', /upper\(\) is not supported/],
      ['a # 1', /unexpected character '#'/],
      ['', /needs an expression/],
      ['(a = 1', /expected '\)'/],
    ];
    for (const [expr, why] of bad) {
      assert.throws(
        () => parseSqlFilter(expr),
        (err: Error) => err instanceof SqlError && why.test(err.message),
        expr,
      );
    }
  });
});

describe('SQL rule actions', () => {
  it('sets system and user properties and removes user properties', () => {
    const m = msg({ keep: 1, secret: 's', n: 2 });
    applySqlAction(
      parseSqlAction("SET sys.To = 'Entity'; SET routed = 'yes', doubled = n * 2; REMOVE secret"),
      m,
    );
    assert.equal(m.to, 'Entity');
    assert.deepEqual(m.application_properties, { keep: 1, n: 2, routed: 'yes', doubled: 4 });
  });

  it('sets sys.Label, and a SET of a missing value stores null', () => {
    const m = msg({});
    applySqlAction(parseSqlAction("SET sys.Label = 'high'; SET copy = missing"), m);
    assert.equal(m.subject, 'high');
    assert.equal(m.application_properties?.copy, null);
  });

  it('refuses bad actions', () => {
    assert.throws(() => parseSqlAction('REMOVE sys.To'), /REMOVE applies to user properties/);
    assert.throws(() => parseSqlAction("UPDATE a = 'b'"), /expected SET or REMOVE/);
    assert.throws(() => parseSqlAction('SET a'), /expected '='/);
    assert.throws(() => parseSqlAction(''), /expected SET or REMOVE/);
  });
});
