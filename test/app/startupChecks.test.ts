import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { Api } from './helpers.js';

/**
 * functions/startupChecks.ts builds the dependencies when the app starts, so a setting only
 * storage can judge fails the start (e2eAccounts: StateStoreAccounts). Storage that is down is
 * not bad configuration: the host must still start, and answer problem+json until it is back.
 */
describe('start-up with storage down', () => {
  let stack: Stack;

  before(async () => {
    stack = await startStack({ ports: randomPorts });
  });
  after(async () => {
    await stack?.stop();
  });

  it('the host starts anyway and answers problem+json, not a start-up failure', async () => {
    await stack.killHost('SIGTERM');
    await stack.azurite.stop();
    const host = await stack.startHost(); // rejects if the host exits before it is ready
    assert.ok(host.httpPort > 0);
    const res = await new Api(stack).operator('GET', '/orders/counts');
    assert.ok(res.status >= 500, `status ${res.status}`);
    assert.equal(typeof res.body.title, 'string', JSON.stringify(res.body));
  });
});
