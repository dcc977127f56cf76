import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { demoStackSettings, main } from '../../local/demo.js';
import { randomPorts, startStack } from '../../local/stack.js';

// `npm run demo` on its own stack (random ports, short timeouts) with a small batch.

function sink() {
  let text = '';
  const out = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return { out, text: () => text };
}

test('the demo on its own stack: every order ends as predicted, exit 0', async () => {
  const { out, text } = sink();
  const code = await main(['--own-stack', '--count', '10', '--plain'], out);
  assert.equal(code, 0, text());
  assert.match(text(), /Submitted 10 orders/);
  assert.match(text(), /final states\s+Pending 0\s+Processing 0\s+Compensating 0\s+Processed \d+/);
  assert.match(text(), /time to terminal\s+p50 [\d.]+ s\s+p95 [\d.]+ s/);
  assert.match(text(), /Every order ended in the state its faults predict\./);
  assert.ok(!text().includes('\u001b['), 'no cursor movement when not live');
});

test('the demo refuses bad options and an unreachable --url', async () => {
  const bad = sink();
  assert.equal(await main(['--count', '0'], bad.out), 2);
  assert.match(bad.text(), /--count must be an integer/);
  const down = sink();
  assert.equal(await main(['--url', 'http://127.0.0.1:9/api', '--key', 'k'], down.out), 1);
  assert.match(down.text(), /nothing answers at http:\/\/127\.0\.0\.1:9\/api/);
});

test('the demo against a running stack whose services all hang: orders miss their prediction, exit 1', async () => {
  // Every remote call hangs, so not one order can end as its faults predict within the deadline.
  const stack = await startStack({
    ports: randomPorts,
    settings: demoStackSettings,
    remoteFaults: { hangRate: 1 },
  });
  try {
    const { out, text } = sink();
    const code = await main(
      ['--url', stack.baseUrl, '--key', stack.functionKey, '--count', '9', '--deadline', '6', '--plain'],
      out,
    );
    assert.equal(code, 1, text());
    assert.match(text(), new RegExp(`against the running stack at ${stack.baseUrl.replace(/[.]/g, '\\.')}`));
    assert.match(text(), /MISMATCH: \d+ order\(s\) did not end as their faults predict:/);
    assert.match(text(), /\(clean\): expected Processed, got (Pending|Processing)/);
    assert.ok(!/Every order ended in the state its faults predict/.test(text()));
  } finally {
    await stack.stop();
  }
});
