import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { defaultRetention } from '../../shared/domain/retention.js';
import { Retention } from '../../shared/retention/retention.js';
import { StateStore } from '../../shared/stateStore/index.js';
import { Api, orderBody, terminal, waitFor } from '../app/helpers.js';
import { launchChromium, openScreen, signIn } from './browser.js';

/**
 * The operator views of issues 24, 25 and 26 in real Chromium against the whole local stack
 * (Azurite, the Service Bus emulator, the functions host, the demo services), read as an operator
 * reads them: the service-limits screen while payment is limited, slow and then answering 429;
 * a waiting step (a callback, an approval) on the order page with Approve and Refuse; retention
 * with a legal hold placed and released from the order page, and a purged order's page.
 */
describe('the operator views in Chromium', () => {
  let stack: Stack;
  let api: Api;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const pageErrors: string[] = [];

  before(async () => {
    browser = await launchChromium();
    stack = await startStack({
      ports: randomPorts,
      settings: {
        SUPERVISOR_SCHEDULE: '*/1 * * * * *',
        // order@2: an approval step above 1000 and payment confirmed by webhook.
        NEW_ORDER_WORKFLOW_VERSION: '2',
        // Payment limited across every instance: one call at once, two per second.
        PAYMENT_MAX_CALLS_PER_SECOND: '2',
        PAYMENT_MAX_CONCURRENT_CALLS: '1',
        CALL_BUDGET_LEASE_SECONDS: '2',
      },
    });
    api = new Api(stack);
    context = await browser.newContext();
    page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await signIn(page, stack.baseUrl, stack.operatorKey);
  });

  after(async () => {
    await context?.close();
    await browser?.close();
    await stack?.stop();
  });

  const submit = async (unitPrice: number, customerId = 'c-1') => {
    const body = { ...orderBody(['SKU-1'], customerId), items: [{ sku: 'SKU-1', quantity: 1, unitPrice }] };
    const res = await api.submit(body, randomUUID());
    assert.equal(res.status, 202, JSON.stringify(res.body));
    return res.body.orderId as string;
  };
  const cell = (p: Page, service: string, col: string) =>
    p.locator(`#service-limits tr[data-service="${service}"] td[data-col="${col}"]`);

  it('service limits: the limit, the rate in force, calls waiting with the oldest waiting order, and the pauses of a 429', async () => {
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Service limits' })
      .click();
    await page.getByRole('heading', { name: 'Service limits' }).waitFor();
    const table = page.locator('#service-limits');
    await table.waitFor();
    assert.deepEqual(await table.locator('tbody th').allInnerTexts(), ['inventory', 'payment', 'shipping']);
    assert.equal(await cell(page, 'payment', 'limit').innerText(), '2/s, 1 at once');
    assert.equal(await cell(page, 'inventory', 'limit').innerText(), 'none');
    assert.equal(await cell(page, 'payment', 'rate-in-force').innerText(), '2/s');

    // Slow payment calls: with one allowed at once, the others wait for a slot.
    stack.remote.payment.setFaults({ latencyMs: 1500 });
    const orders: string[] = [];
    try {
      for (let i = 0; i < 6; i++) orders.push(await submit(10, `limits-${i}`));
      const waiting = await waitFor(
        'the screen to show calls waiting for payment',
        async () => {
          const n = Number(await cell(page, 'payment', 'waiting').innerText());
          return n > 0 ? n : undefined;
        },
        60_000,
      );
      assert.ok(waiting <= orders.length, `${waiting} waiting of ${orders.length}`);
      const oldest = cell(page, 'payment', 'oldest').getByRole('link');
      await oldest.waitFor();
      const href = (await oldest.getAttribute('href')) ?? '';
      assert.ok(orders.includes(href.replace('#/orders/', '')), `${href} is one of the orders submitted`);
      assert.match(await cell(page, 'payment', 'oldest').innerText(), /waiting \d+ s/);
      assert.match(
        await page.locator('#service-limits caption').innerText(),
        /\d+ requests wait for a call slot/,
      );

      // The service pushes back: one 429 with Retry-After pauses every instance, and the screen says so.
      stack.remote.payment.setFaults({ answerStatus: 429, retryAfterSeconds: 5 });
      await waitFor(
        'the screen to show the pause',
        async () => /paused until/.test(await cell(page, 'payment', 'pauses').innerText()),
        60_000,
      );
      assert.match(await cell(page, 'payment', 'pauses').innerText(), /^[1-9]\d*; paused until/);
      assert.equal(await cell(page, 'payment', 'rate-in-force').innerText(), '0/s');
      assert.match(await cell(page, 'payment', 'pauses').innerText(), /last 429\/503/);
    } finally {
      stack.remote.payment.setFaults({});
    }
    // Waiting is not failing: every order finishes.
    for (const id of orders) assert.equal((await api.until(id, terminal, 120_000)).processState, 'Processed');
    await waitFor(
      'nothing to wait any more',
      async () => (await cell(page, 'payment', 'waiting').innerText()) === '0',
      30_000,
    );
    // Once the pause is over the rate in force is what the adaptation left (half, then rising).
    await waitFor(
      'the pause to end on the screen',
      async () => !/paused until/.test(await cell(page, 'payment', 'pauses').innerText()),
      30_000,
    );
    assert.match(await cell(page, 'payment', 'rate-in-force').innerText(), /^[12](\.\d+)?\/s/);
  });

  it('a step waiting for a callback shows its reference and offers no decision', async () => {
    stack.remote.payment.setFaults({ callbackLossRate: 1 });
    let orderId: string;
    let url: string;
    try {
      const before = stack.remote.payment.webhooks().length;
      orderId = await submit(10);
      url = await waitFor(
        'the payment service to accept',
        () =>
          stack.remote.payment
            .webhooks()
            .slice(before)
            .find((w) => w.outcome === 'lost')?.url,
      );
    } finally {
      stack.remote.payment.setFaults({});
    }
    await openScreen(page, stack.baseUrl, `#/orders/${orderId}`);
    const panel = page.locator('#waiting');
    await panel.getByRole('heading', { name: 'Waiting: payment' }).waitFor();
    assert.match(
      await panel.innerText(),
      /For the service to call back since .+; complete-by .+; reference \S+/,
    );
    assert.equal(await panel.getByRole('button').count(), 0, 'no Approve or Refuse for a callback');
    // The service calls back (the test sends the callback it "lost"): the page follows, the panel goes.
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ outcome: 'succeeded', reference: 'ch-1' }),
    });
    assert.equal(res.status, 202);
    await waitFor('the order to be Processed on the page', async () =>
      (await page.locator('#order-state').innerText()) === 'Processed' ? true : undefined,
    );
    assert.equal(await page.locator('#waiting').count(), 0);
  });

  it('an approval: Approve and Refuse need a reason, each decision is recorded with the operator, the order follows', async () => {
    const approved = await submit(2000);
    const refused = await submit(2500);
    for (const id of [approved, refused]) {
      await waitFor(`${id} to wait for approval`, async () => {
        const view = await api.get(id);
        return view.body.steps?.some((s) => s.name === 'approval' && s.waitingSince) ? true : undefined;
      });
    }
    await openScreen(page, stack.baseUrl, `#/orders/${approved}`);
    const panel = page.locator('#waiting');
    await panel.getByRole('heading', { name: 'Waiting: approval' }).waitFor();
    assert.match(await panel.innerText(), /For an operator to approve or refuse since/);
    const approve = panel.getByRole('button', { name: 'Approve' });
    const refuse = panel.getByRole('button', { name: 'Refuse' });
    assert.ok(await approve.isDisabled(), 'no decision without a reason');
    assert.ok(await refuse.isDisabled());
    await panel.getByLabel('Reason (recorded with your name)').focus();
    await page.keyboard.type('customer known, checked by phone');
    assert.ok(!(await approve.isDisabled()));
    await approve.click();
    await page
      .locator('#approval-outcome')
      .getByText(/approved: the order is/)
      .waitFor();
    await waitFor(
      'the approved order to be Processed on the page',
      async () => ((await page.locator('#order-state').innerText()) === 'Processed' ? true : undefined),
      90_000,
    );
    const byOperator = page.locator('#timeline li.operator').first();
    await byOperator.waitFor();
    assert.match(await byOperator.innerText(), /local-operator/);

    await openScreen(page, stack.baseUrl, `#/orders/${refused}`);
    await page.locator('#waiting').getByRole('heading', { name: 'Waiting: approval' }).waitFor();
    await page.getByLabel('Reason (recorded with your name)').fill('amount not plausible');
    await page.locator('#waiting').getByRole('button', { name: 'Refuse' }).click();
    await page
      .locator('#approval-outcome')
      .getByText(/refused: the order is/)
      .waitFor();
    await waitFor(
      'the refused order to be Compensated on the page',
      async () => ((await page.locator('#order-state').innerText()) === 'Compensated' ? true : undefined),
      90_000,
    );
    assert.equal((await page.locator('#timeline li.operator').count()) >= 1, true);
  });

  it('an approval decided meanwhile by another operator: the refusal (409) is shown and stays shown', async () => {
    const orderId = await submit(3000);
    await waitFor('the order to wait for approval', async () => {
      const view = await api.get(orderId);
      return view.body.steps?.some((s) => s.name === 'approval' && s.waitingSince) ? true : undefined;
    });
    const other = await context.newPage();
    other.on('pageerror', (e) => pageErrors.push(e.message));
    try {
      await signIn(other, stack.baseUrl, stack.operatorKey);
      // This tab's live updates are cut, as on a slow link: it still shows the approval waiting.
      await other.route('**/api/orders/changes**', (route) => route.abort());
      await openScreen(other, stack.baseUrl, `#/orders/${orderId}`);
      await other.locator('#waiting').getByRole('heading', { name: 'Waiting: approval' }).waitFor();
      await other.getByLabel('Reason (recorded with your name)').fill('looks fine');
      // Another operator approves first.
      const first = await api.call('POST', `/orders/${orderId}/approval`, {
        operator: true,
        body: { decision: 'approve', reason: 'first' },
      });
      assert.equal(first.status, 202);
      await other.locator('#waiting').getByRole('button', { name: 'Refuse' }).click();
      const outcome = other.locator('#approval-outcome');
      await outcome.getByText(/\(409\)/).waitFor();
      // The page re-read the order (no longer waiting); what the operator was told is still there.
      await waitFor('the order page to re-read the order', async () =>
        (await other.locator('#order-state').innerText()) !== 'Pending' ? true : undefined,
      );
      await new Promise((r) => setTimeout(r, 1000));
      assert.match(await outcome.innerText(), /\(409\)/);
    } finally {
      await other.close();
    }
  });

  it('retention: the readout, a legal hold placed and released on the order page, a purge that keeps the held order, a purged order', async () => {
    const held = await submit(10, 'retention-held');
    const purgedLater = await submit(10, 'retention-purged');
    for (const id of [held, purgedLater]) {
      assert.equal((await api.until(id, terminal, 90_000)).processState, 'Processed');
    }
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Retention' }).click();
    await page.getByRole('heading', { name: 'Retention', exact: true }).waitFor();
    const policy = page.locator('#retention-policy');
    await policy.waitFor();
    assert.match(await policy.innerText(), /Terminal orders\s+90 days/);
    assert.match(await policy.innerText(), /Idempotency tombstones\s+365 days/);
    assert.match(await policy.innerText(), /Archive\s+on/);
    await page.locator('#oldest-retained').getByRole('link').waitFor();
    assert.match(await page.locator('#oldest-retained').innerText(), /Processed/);
    assert.equal(await page.locator('#past-retention').innerText(), '0');
    await page.locator('#held-none').waitFor();

    // Hold from the order page, with a reason.
    await openScreen(page, stack.baseUrl, `#/orders/${held}`);
    const hold = page.locator('#legal-hold');
    await hold.getByText(/^Not held/).waitFor();
    await hold.getByLabel('Reason for the hold (kept with it)').fill('litigation 42');
    await hold.getByRole('button', { name: 'Place legal hold' }).click();
    await page
      .getByRole('dialog', { name: /Hold order/ })
      .getByRole('button', { name: 'Hold this order' })
      .click();
    await hold.getByText(/Hold: the order is held/).waitFor();
    await hold.getByText(/Held by local-operator since .+: litigation 42/).waitFor();
    await page.locator('#timeline li[data-event="LegalHoldPlaced"]').waitFor();

    await openScreen(page, stack.baseUrl, '#/retention');
    const row = page.locator(`#held-orders tr[data-order-id="${held}"]`);
    await row.waitFor();
    assert.match(await row.innerText(), /local-operator/);
    assert.match(await row.innerText(), /litigation 42/);

    // The purge as the Supervisor would run it 100 days from now, on the stack's own tables.
    const connection = {
      kind: 'connectionString' as const,
      connectionString: stack.azurite.connectionString,
    };
    const store = await StateStore.open(connection);
    const retention = await Retention.open(store, connection, { ...defaultRetention }, connection);
    const report = await retention.purgeNow(new Date(Date.now() + 100 * 86_400_000), 500);
    assert.ok(report.purged >= 1, JSON.stringify(report));
    await page.getByRole('button', { name: 'Refresh' }).click();
    await waitFor('the last purge on the screen', async () =>
      Number(await page.locator('#last-purge dd').nth(1).innerText()) === report.purged ? true : undefined,
    );
    assert.match(
      await page.locator('#last-purge').innerText(),
      new RegExp(`Purged in it\\s+${report.purged}`),
    );
    await row.waitFor(); // still held, still there
    assert.equal((await api.get(held)).status, 200, 'the held order was not purged');

    // A purged order's page shows its archive instead of failing.
    await openScreen(page, stack.baseUrl, `#/orders/${purgedLater}`);
    await page.getByText(/Archived: purged on/).waitFor();
    assert.match(await page.locator('#archived-order').innerText(), /order-archive\/orders\//);
    await page.locator('#order-state').getByText('Processed').waitFor();
    assert.ok((await page.locator('#timeline li').count()) >= 3, 'the archived history');
    assert.equal(await page.locator('#legal-hold').count(), 0, 'a purged order cannot be held');

    // Release from the order page: retention applies again.
    await openScreen(page, stack.baseUrl, `#/orders/${held}`);
    await hold.getByRole('button', { name: 'Release legal hold' }).click();
    await page
      .getByRole('dialog', { name: /Release order/ })
      .getByRole('button', { name: 'Release this order' })
      .click();
    await hold.getByText(/no longer held/).waitFor();
    await hold.getByText(/^Not held/).waitFor();
    await openScreen(page, stack.baseUrl, '#/retention');
    await page.locator('#held-none').waitFor();
  });

  it('no script error on any screen', () => {
    assert.deepEqual(pageErrors, []);
  });
});
