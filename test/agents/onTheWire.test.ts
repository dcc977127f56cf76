import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { whenOnTheWire } from '../../shared/agents/onTheWire.js';

/**
 * When a call's request reaches the socket (issue 26: the rate window counts a start from there).
 * Against a real HTTP server on a loopback port, with Node's own fetch: the hook is Node's
 * diagnostics channel, which only a real request publishes to.
 */
describe("a call's request on the wire", () => {
  let url = '';
  const server = createServer((req, res) => {
    req.resume();
    // The answer comes late: the hook must fire when the request is written, not when answered.
    setTimeout(() => res.end('{}'), 300);
  });
  before(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/charge`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  const post = (key: string) =>
    fetch(url, { method: 'POST', headers: { 'idempotency-key': key }, body: '{}' }).then((r) => r.text());

  it('fires once, when the headers are written, for the key it waits for only', async () => {
    const seen: string[] = [];
    let at = 0;
    whenOnTheWire('order-1:payment', () => {
      seen.push('order-1');
      at = Date.now();
    });
    whenOnTheWire('order-2:payment', () => seen.push('order-2'));
    const started = Date.now();
    await post('order-1:payment');
    const answered = Date.now();
    await post('order-1:payment');
    assert.deepEqual(seen, ['order-1'], 'once, and not for a key nobody sent');
    assert.ok(
      at - started < 250 && answered - at >= 250,
      `fired ${at - started} ms after the send, ${answered - at} ms before the answer`,
    );
  });

  it('a wait given up is not called', async () => {
    let called = false;
    const forget = whenOnTheWire('order-3:payment', () => (called = true));
    forget();
    await post('order-3:payment');
    assert.equal(called, false);
  });
});
