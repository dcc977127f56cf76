import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { assertPortFree } from '../../local/ports.js';
import { portFlags } from '../../local/startOptions.js';
import { faultSku } from '../../local/remoteServices/index.js';
import { freePorts } from './helpers.js';

// `npm start` itself, as a child process (node dist/local/start.js): readiness block, the curl
// from the block works, Ctrl-C (SIGINT) stops everything with exit 0, a busy port is exit 1.

const startJs = resolve(__dirname, '..', '..', 'local', 'start.js');
const scratch = mkdtempSync(join(tmpdir(), 'e2e-start-'));
const children: ChildProcess[] = [];
after(async () => {
  // A test that failed half-way leaves its `npm start` running: Ctrl-C it, so that it stops its
  // children too (they run in their own process groups, a SIGKILL would orphan them).
  const alive = children.filter((c) => c.exitCode === null && c.signalCode === null);
  await Promise.all(
    alive.map(async (c) => {
      const exited = new Promise<void>((r) => c.once('exit', () => r()));
      c.kill('SIGINT');
      const timer = setTimeout(() => c.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    }),
  );
  rmSync(scratch, { recursive: true, force: true });
});

function run(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [startJs, ...args], {
    cwd: scratch,
    env: { ...process.env, FUNCTIONS_LOCAL_KEY: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );
  return { child, exited, out: () => stdout, err: () => stderr };
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The words of a shell line made of plain words and '...' quoted ones (what the block prints). */
function shellWords(line: string): string[] {
  const words: string[] = [];
  const re = /'((?:[^']|'\\'')*)'|(\S+)/g;
  for (const m of line.matchAll(re)) words.push(m[1] !== undefined ? m[1].replace(/'\\''/g, "'") : m[2]);
  return words;
}

function curlToFetch(line: string): { url: string; init: RequestInit } {
  const words = shellWords(line.trim());
  assert.equal(words[0], 'curl');
  const headers: Record<string, string> = {};
  let method = 'GET';
  let body: string | undefined;
  let url = '';
  for (let i = 1; i < words.length; i++) {
    const w = words[i];
    if (w === '-X') method = words[++i];
    else if (w === '-H') {
      const [name, ...value] = words[++i].split(':');
      headers[name.trim()] = value.join(':').trim();
    } else if (w === '-d') body = words[++i];
    else if (w.startsWith('http')) url = w;
  }
  return { url, init: { method, headers, body } };
}

test('npm start: readiness block, the curl from it, SIGINT exits 0 and frees every port', async () => {
  const ports = await freePorts(portFlags.length);
  const dataDir = join(scratch, 'data');
  const args = ['--in-memory', '--data-dir', dataDir];
  portFlags.forEach((p, i) => args.push(p.flag, String(ports[i])));
  const started = run(args);
  await until('the readiness block', () => started.out().includes('Ctrl-C stops everything.'));
  const block = started.out();
  assert.equal(block.match(/is running locally/g)?.length, 1, 'one readiness block');
  const key = readFileSync(join(dataDir, 'function-key'), 'utf8').trim();
  assert.ok(block.includes(`Function key      ${key}`), 'the block shows the persisted key');
  assert.ok(block.includes(`http://127.0.0.1:${ports[0]}/api`));
  for (const route of ['/api/orders', '/api/orders/{orderId}', '/api/orders/{orderId}/cancel']) {
    assert.ok(block.includes(route), route);
  }
  assert.ok(block.includes('UseDevelopmentEmulator=true'));
  assert.ok(block.includes('STEP_TIMEOUT_SECONDS'));
  assert.ok(existsSync(join(dataDir, 'stack.json')));

  const lines = block.split('\n');
  const submit = curlToFetch(lines.find((l) => l.trim().startsWith('curl -i -X POST'))!);
  const poll = curlToFetch(lines.find((l) => l.trim().startsWith('curl -s '))!);
  const response = await fetch(submit.url, submit.init);
  assert.equal(response.status, 202);
  const accepted = (await response.json()) as { orderId: string };
  assert.ok(poll.url.endsWith(`/orders/${accepted.orderId}`), 'the poll line names the submitted order');
  let state = '';
  const end = Date.now() + 60_000;
  while (state !== 'Processed' && Date.now() < end) {
    const r = await fetch(poll.url, poll.init);
    state = ((await r.json()) as { processState: string }).processState;
    if (state !== 'Processed') await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(state, 'Processed');

  // The operator line: its credential lists orders; the function key does not.
  const operatorLine = lines.find((l) => l.trim().startsWith('curl') && l.includes('Authorization: Bearer'))!;
  assert.ok(operatorLine, 'the block has an operator curl');
  const operatorKey = /Operator key {6}(\S+)/.exec(block)?.[1];
  assert.ok(operatorKey && operatorLine.includes(operatorKey), 'the curl uses the printed operator key');
  const list = curlToFetch(operatorLine);
  const listed = await fetch(list.url, list.init);
  assert.equal(listed.status, 200);
  assert.equal(((await listed.json()) as { state: string }).state, 'Error');
  const asClient = await fetch(list.url, { headers: { 'x-functions-key': key } });
  assert.equal(asClient.status, 403, 'the function key is not an operator credential');
  await asClient.arrayBuffer();
  await until(
    'the compact function log',
    () => /scheduler\s+reply applied order=/.test(started.out()),
    10_000,
  );

  started.child.kill('SIGINT');
  const exit = await started.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, started.err());
  assert.ok(!existsSync(join(dataDir, 'stack.json')), 'stack.json removed on stop');
  for (const [i, port] of ports.entries()) await assertPortFree(port, portFlags[i].what, portFlags[i].flag);
});

test('npm start: a busy port is exit 1 with one line naming the port and the flag', async () => {
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
  const busy = (blocker.address() as { port: number }).port;
  try {
    const ports = await freePorts(portFlags.length);
    const args = ['--in-memory', '--data-dir', join(scratch, 'busy')];
    portFlags.forEach((p, i) => args.push(p.flag, String(p.flag === '--servicebus-port' ? busy : ports[i])));
    const started = run(args);
    const exit = await started.exited;
    assert.equal(exit.code, 1);
    const message = started.err().trim();
    assert.equal(message.split('\n').length, 1, message);
    assert.match(message, new RegExp(`port ${busy} .*--servicebus-port`));
    assert.doesNotMatch(message, /\n\s+at /);
  } finally {
    blocker.close();
  }
});

test('npm start: a bad flag or setting is exit 2 and starts nothing', async () => {
  const badPort = run(['--http-port', 'seventy']);
  assert.equal((await badPort.exited).code, 2);
  assert.match(badPort.err(), /--http-port must be a port number/);
  const unknown = run(['--colour']);
  assert.equal((await unknown.exited).code, 2);
  assert.match(unknown.err(), /unknown option --colour/);
});

test('npm start with a data folder: a restart keeps the order and its queued messages, no Supervisor needed', async () => {
  const ports = await freePorts(portFlags.length);
  const dataDir = join(scratch, 'kept');
  const args = ['--data-dir', dataDir];
  portFlags.forEach((p, i) => args.push(p.flag, String(ports[i])));
  // A step timeout far beyond this test: only a kept message can finish the order in time; the
  // Supervisor would not re-drive it for 5 minutes (the longest step timeout start-up accepts
  // with this host.json: the lock renewal and the duplicate-detection window end at 300 s).
  const env = { STEP_TIMEOUT_SECONDS: '300', SUPERVISOR_SCHEDULE: '0 0 * * * *' };
  const api = `http://127.0.0.1:${ports[0]}/api`;
  const first = run(args, env);
  await until('the readiness block', () => first.out().includes('Ctrl-C stops everything.'));
  const key = readFileSync(join(dataDir, 'function-key'), 'utf8').trim();
  const headers = { 'content-type': 'application/json', 'x-functions-key': key };
  const view = async (id: string) =>
    (await (await fetch(`${api}/orders/${id}`, { headers })).json()) as {
      processState: string;
      failureCount: number;
      updatedAt: string;
      steps: Array<{ name: string; status: string; attempt: number }>;
    };
  const response = await fetch(`${api}/orders`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      customerId: 'c-restart',
      items: [{ sku: faultSku('shipping', 'slow', 3000), quantity: 1, unitPrice: 5 }],
      shippingAddress: { name: 'R', line1: 'Main St 1', city: 'Berlin', postalCode: '10115', country: 'DE' },
    }),
  });
  assert.equal(response.status, 202, await response.clone().text());
  const { orderId } = (await response.json()) as { orderId: string };
  await until('the shipping step running', async () => {
    const v = await view(orderId);
    return v.steps.find((s) => s.name === 'shipping')?.status === 'Running';
  });
  // The payment confirmed by webhook before the restart: its callback URL (and token) stays valid.
  const paymentUrl = (JSON.parse(readFileSync(join(dataDir, 'stack.json'), 'utf8')) as StackInfo).remote
    .payment;
  const sent = (
    (await (await fetch(`${paymentUrl}/_admin/webhooks`)).json()) as { sent: Array<{ url: string }> }
  ).sent;
  const callbackUrl = sent.find((w) => w.url.includes('/callbacks/'))?.url;
  assert.ok(callbackUrl, 'the payment service called back');
  first.child.kill('SIGINT');
  assert.deepEqual(await first.exited, { code: 0, signal: null }, first.err());
  assert.ok(existsSync(join(dataDir, 'servicebus', 'servicebus.log')), 'the emulator kept its log');

  const secondStartedAt = Date.now();
  const second = run(args, env);
  await until('the readiness block again', () => second.out().includes('Ctrl-C stops everything.'));
  let v = await view(orderId);
  const end = Date.now() + 60_000;
  while (v.processState !== 'Processed' && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 200));
    v = await view(orderId);
  }
  assert.equal(v.processState, 'Processed', JSON.stringify(v));
  assert.ok(
    Date.parse(v.updatedAt) >= secondStartedAt,
    `finished by the second run (${v.updatedAt}), not while the first one stopped`,
  );
  assert.equal(v.failureCount, 0, 'no step timed out: the queued message carried the order on');
  // npm start runs order@2: the approval of an order under 1,000 is waived (never dispatched).
  assert.deepEqual(
    v.steps.map((s) => [s.name, s.attempt]),
    [
      ['inventory', 1],
      ['approval', 0],
      ['payment', 1],
      ['shipping', 1],
    ],
  );
  // Signed before the restart, checked after it: the signing key is kept in the data folder, so a
  // callback pending across a restart is not refused as forged (401).
  const again = await fetch(callbackUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ outcome: 'succeeded', reference: 'again' }),
  });
  assert.equal(again.status, 200, `a pre-restart callback answered ${again.status}: ${await again.text()}`);
  second.child.kill('SIGINT');
  assert.deepEqual(await second.exited, { code: 0, signal: null }, second.err());
});

interface StackInfo {
  remote: { payment: string };
}
