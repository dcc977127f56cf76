import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readinessBlock, type ReadinessInfo } from '../../local/readiness.js';
import { openApiDocument } from '../../shared/http/openapi.js';

/** Just what the block reads of a running stack. */
const info = {
  stack: {
    baseUrl: 'http://127.0.0.1:7071/api',
    functionKey: 'fk',
    operatorKey: 'ok',
    env: {},
    azurite: { blobUrl: 'b', queueUrl: 'q', tableUrl: 't', connectionString: 'cs' },
    serviceBus: { connectionString: 'sb' },
    remote: { inventory: { url: 'i' }, payment: { url: 'p' }, shipping: { url: 's' } },
    host: () => ({ functions: [] }),
  },
  readyMs: 1000,
  dataDir: '.data',
  inMemory: true,
  keySource: 'test',
  operatorKeySource: 'test',
} as unknown as ReadinessInfo;

/** Every operation the OpenAPI document secures with the operator credential, as "METHOD /path". */
function operatorOperations(): string[] {
  const doc = openApiDocument();
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops)
      .filter(([, op]) => JSON.stringify(op.security ?? []).includes('operatorBearer'))
      .map(([method]) => `${method.toUpperCase()} ${path}`),
  );
}

test('the readiness block names every route the operator key opens', () => {
  const block = readinessBlock(info);
  const operations = operatorOperations();
  assert.ok(operations.length >= 10, operations.join(', '));
  const lines = block.split('\n');
  const unnamed = operations.filter((op) => {
    const [method, path] = op.split(' ') as [string, string];
    return !lines.some((l) => l.includes(` ${method} `) && l.split(/\s+/).includes(path));
  });
  assert.deepEqual(unnamed, [], block);
});
