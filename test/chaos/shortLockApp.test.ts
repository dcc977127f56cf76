import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { writeShortLockAppRoot } from '../../chaos/shortLockApp.js';
import { repoRoot } from '../../chaos/harness.js';
import { loadConfig } from '../../emulators/servicebus/config.js';
import { readHostJson } from '../../local/host/settings.js';
import { resolveEntryFiles } from '../../local/host/appLoader.js';
import { orderWorkflow } from '../../shared/domain/orderWorkflow.js';

const agentQueues: string[] = orderWorkflow.steps.map((s) => s.agentQueue);

test('the short-lock app root: agent locks short, renewal off, the same functions, the repo untouched', () => {
  const realConfig = readFileSync(join(repoRoot, 'infra', 'servicebus-emulator', 'Config.json'), 'utf8');
  const realHost = readFileSync(join(repoRoot, 'host.json'), 'utf8');
  const root = writeShortLockAppRoot({
    repoRoot,
    lockDuration: 'PT5S',
    maxAutoLockRenewalDuration: '00:00:00',
    maxConcurrentCalls: 200,
  });
  try {
    // Read the way the emulator and the local host read them.
    const config = loadConfig(join(root, 'infra', 'servicebus-emulator', 'Config.json'));
    const original = loadConfig(join(repoRoot, 'infra', 'servicebus-emulator', 'Config.json'));
    for (const q of config.queues) {
      const before = original.queues.find((o) => o.name === q.name)!;
      if (agentQueues.includes(q.name)) {
        assert.equal(q.lockDurationMs, 5000, q.name);
        assert.deepEqual({ ...q, lockDurationMs: before.lockDurationMs }, before, `${q.name}: only the lock`);
      } else {
        assert.deepEqual(q, before, `${q.name} unchanged`);
      }
    }
    assert.deepEqual(config.topics, original.topics);

    const host = readHostJson(root);
    assert.equal(host.serviceBus.maxAutoLockRenewalDurationMs, 0);
    assert.equal(host.serviceBus.maxConcurrentCalls, 200);
    assert.equal(
      host.serviceBus.autoCompleteMessages,
      readHostJson(repoRoot).serviceBus.autoCompleteMessages,
    );

    const files = resolveEntryFiles(root);
    assert.deepEqual(files, resolveEntryFiles(repoRoot));
    assert.ok(
      files.map((f) => basename(f)).includes('agents.js'),
      'the Agents are registered by functions/agents.js',
    );

    assert.equal(
      readFileSync(join(repoRoot, 'infra', 'servicebus-emulator', 'Config.json'), 'utf8'),
      realConfig,
    );
    assert.equal(readFileSync(join(repoRoot, 'host.json'), 'utf8'), realHost);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the short-lock app root refuses a Config.json without the agent queues', () => {
  const fakeRepo = mkdtempSync(join(tmpdir(), 'short-lock-fake-repo-'));
  try {
    writeFileSync(join(fakeRepo, 'package.json'), JSON.stringify({ name: 'x', main: 'dist/functions/*.js' }));
    writeFileSync(join(fakeRepo, 'host.json'), JSON.stringify({ version: '2.0' }));
    mkdirSync(join(fakeRepo, 'infra', 'servicebus-emulator'), { recursive: true });
    writeFileSync(
      join(fakeRepo, 'infra', 'servicebus-emulator', 'Config.json'),
      JSON.stringify({ UserConfig: { Namespaces: [{ Queues: [{ Name: 'scheduler', Properties: {} }] }] } }),
    );
    assert.throws(
      () =>
        writeShortLockAppRoot({
          repoRoot: fakeRepo,
          lockDuration: 'PT5S',
          maxAutoLockRenewalDuration: '00:00:00',
        }),
      /0 of the 3 agent queues/,
    );
  } finally {
    rmSync(fakeRepo, { recursive: true, force: true });
  }
});
