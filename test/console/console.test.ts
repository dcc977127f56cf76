import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ServiceBusClient } from '@azure/service-bus';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { randomPorts, startStack, type Stack } from '../../local/stack.js';
import { Api, orderBody, terminal, waitFor } from '../app/helpers.js';
import { launchChromium, openScreen, signIn } from './browser.js';

/**
 * The operator's console in real Chromium against the whole local stack: the page is refused
 * without the operator credential, and an operator finds orders, reads their history, acts on
 * them one by one and in bulk, and redrives a dead letter, all through the page as a person would
 * (labels, roles, keyboard), while the stack processes orders for real.
 *
 * Routes from other parts of issue 15 that these tests drive: counts, changes, history, retry,
 * bulk and the list filters (branch `history`), dead letters (branch `deadletters`).
 */
describe('the operator console in Chromium', () => {
  let stack: Stack;
  let api: Api;
  let bus: ServiceBusClient;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let processedOrder: string;

  before(async () => {
    browser = await launchChromium();
    stack = await startStack({
      ports: randomPorts,
      settings: {
        STEP_TIMEOUT_SECONDS: '3',
        SUPERVISOR_SCHEDULE: '*/1 * * * * *',
        FAILURE_SOFT_THRESHOLD: '1',
        FAILURE_HARD_THRESHOLD: '2',
        EXTENDED_BACKOFF_SECONDS: '2',
      },
    });
    api = new Api(stack);
    bus = new ServiceBusClient(stack.env.ServiceBusConnection);
    context = await browser.newContext();
    page = await context.newPage();
    await signIn(page, stack.baseUrl, stack.operatorKey);
    processedOrder = await api.place(['SKU-1']);
    assert.equal((await api.until(processedOrder, terminal)).processState, 'Processed');
  });

  after(async () => {
    await context?.close();
    await browser?.close();
    await bus?.close();
    await stack?.stop();
  });

  const orderState = (p: Page) => p.locator('#order-state').innerText();

  it('refuses the page without the operator credential (401) and with a client key (403), opens it with the key', async () => {
    const fresh = await browser.newContext();
    const page = await fresh.newPage();
    const refused = await page.goto(`${stack.baseUrl}/console`);
    assert.equal(refused?.status(), 401);
    await page.getByRole('heading', { name: 'Operator sign-in required' }).waitFor();
    assert.equal(await page.getByRole('navigation').count(), 0, 'no console before sign-in');

    await page.getByLabel('Operator key').fill('not-the-operator-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('The key was refused (401)').waitFor();

    const client = await browser.newContext({ extraHTTPHeaders: { 'x-functions-key': stack.functionKey } });
    try {
      const forbidden = await (await client.newPage()).goto(`${stack.baseUrl}/console`);
      assert.equal(forbidden?.status(), 403);
      assert.match(forbidden?.headers()['content-type'] ?? '', /application\/problem\+json/);
    } finally {
      await client.close();
    }

    await page.getByLabel('Operator key').fill('');
    await signIn(page, stack.baseUrl, stack.operatorKey);
    assert.deepEqual(
      await page.getByRole('navigation', { name: 'Console' }).getByRole('link').allInnerTexts(),
      ['Dashboard', 'Orders', 'Bulk actions', 'Dead letters', 'Service limits', 'Retention'],
    );
    // The page itself, for the operator: no data in it, scripts from this origin only.
    const direct = await fetch(`${stack.baseUrl}/console`, {
      headers: { Authorization: `Bearer ${stack.operatorKey}` },
    });
    assert.equal(direct.status, 200);
    assert.match(direct.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    assert.match(await direct.text(), /<main id="app">/);
    const script = await fetch(`${stack.baseUrl}/console/assets/app.js`);
    assert.equal(script.status, 200);
    assert.match(script.headers.get('content-type') ?? '', /javascript/);
    await script.body?.cancel();
    const missing = await fetch(`${stack.baseUrl}/console/assets/secrets.json`);
    assert.equal(missing.status, 404);
    await missing.body?.cancel();
    await fresh.close();
  });

  it('shows orders per state, in flight, the charts and dead letters on the dashboard', async () => {
    await openScreen(page, stack.baseUrl, '#/');
    const processedRow = page.locator('#state-counts tr[data-state="Processed"] td');
    await waitFor(
      'the Processed count to include the order',
      async () => Number(await processedRow.innerText()) >= 1,
    );
    await page.locator('#in-flight').waitFor();
    await page.locator('#throughput canvas').first().waitFor();
    await page.locator('#failure-rate canvas').first().waitFor();
    await page.locator('#dead-letter-counts').getByText('scheduler').waitFor();
  });

  it('finds an order by its id', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Orders' }).click();
    await page.getByLabel('Order id').fill('not-an-id');
    await page.getByRole('button', { name: 'Open order' }).click();
    await page.getByText('An order id is a UUID').waitFor();
    await page.getByLabel('Order id').fill(processedOrder);
    await page.getByRole('button', { name: 'Open order' }).click();
    await page.getByRole('heading', { name: `Order ${processedOrder}` }).waitFor();
    await waitFor('the order page to show the state', async () => (await orderState(page)) === 'Processed');
    // The history begins with the submission.
    await page.locator('#timeline li').first().waitFor();
    assert.match(await page.locator('#timeline li .actor').first().innerText(), /^submission/);
  });

  it("reads an order's timeline after a step retry and a compensation", async () => {
    // Inventory hangs once (a timeout, then attempt 2 succeeds); payment refuses: compensation.
    const orderId = await api.place(['FAULT:inventory:hang:1', 'FAULT:payment:permanent']);
    const done = await api.until(orderId, terminal, 90_000);
    assert.equal(done.processState, 'Compensated', JSON.stringify(done));
    await openScreen(page, stack.baseUrl, `#/orders/${orderId}`);
    await waitFor('the order page', async () => (await orderState(page)) === 'Compensated');
    const timeline = page.locator('#timeline');
    await timeline.locator('li').first().waitFor();
    const retried = timeline.locator('li', { hasText: 'step inventory, attempt 2' });
    assert.ok((await retried.count()) >= 1, await timeline.innerText());
    assert.ok((await timeline.locator('li.compensation').count()) >= 1, await timeline.innerText());
    assert.ok((await timeline.locator('li.failure').count()) >= 1, 'the timeout and the refusal show');
    assert.match(await timeline.locator('li').last().innerText(), /Compensated/);
    assert.match(await page.locator('#steps').innerText(), /inventory/);
  });

  it('resubmits an Error order after confirming and shows it turn Processed without reloading', async () => {
    stack.remote.shipping.setFaults({ hangRate: 1 }); // shipping is down: run 1 gives up
    let orderId: string;
    try {
      orderId = await api.place(['SKU-1']);
      const errored = await api.until(orderId, terminal, 120_000);
      assert.equal(errored.processState, 'Error', JSON.stringify(errored));
    } finally {
      stack.remote.shipping.setFaults({}); // the operator fixed the cause
    }
    await openScreen(page, stack.baseUrl, `#/orders/${orderId}`);
    await waitFor('the Error order', async () => (await orderState(page)) === 'Error');
    // Only what the API allows on an Error order is offered: cancelling one answers 409.
    const offered = async (name: string) =>
      !(await page.getByRole('button', { name, exact: true }).isDisabled());
    assert.deepEqual(
      {
        resubmit: await offered('Resubmit'),
        retry: await offered('Retry now'),
        cancel: await offered('Cancel'),
      },
      { resubmit: true, retry: false, cancel: false },
    );
    await page.evaluate(() => Object.assign(globalThis, { sameDocument: true }));
    const resubmit = page.getByRole('button', { name: 'Resubmit', exact: true });
    await resubmit.focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: /Resubmit order/ });
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Resubmit this order' }).click();
    await page.getByText('Resubmit: accepted').waitFor();
    await waitFor(
      'the order to turn Processed on the page',
      async () => (await orderState(page)) === 'Processed',
      90_000,
    );
    assert.equal(await page.evaluate(() => (globalThis as { sameDocument?: boolean }).sameDocument), true);
    const byOperator = page.locator('#timeline li.operator', { hasText: /resubmit/i });
    assert.match(await byOperator.first().innerText(), /local-operator/);
  });

  it('bulk-cancels a filtered set after the two-step confirmation', async () => {
    stack.remote.payment.setFaults({ answerStatus: 401 }); // payment stalls: the orders stay in flight
    const customer = `bulk-${randomUUID().slice(0, 8)}`;
    const mine = new Set<string>();
    const bystander = await api.place(['SKU-9']); // another customer's order in flight too
    for (let i = 0; i < 3; i++) {
      const res = await api.submit(orderBody(['SKU-1'], customer), randomUUID());
      assert.equal(res.status, 202);
      mine.add(res.body.orderId as string);
    }
    const cancelled = new Set<string>();
    try {
      // With orders in flight the dashboard names the oldest, its words spaced as written.
      await openScreen(page, stack.baseUrl, '#/');
      const oldest = page.locator('#oldest-in-flight');
      await oldest.waitFor();
      assert.match(await oldest.innerText(), /^Oldest: [0-9a-f]{8}, \d+ (s|min) of its \d+ (s|min) bound$/);
      await openScreen(page, stack.baseUrl, '#/bulk');
      await page.getByLabel('Action', { exact: true }).selectOption('cancel');
      await page.getByLabel('Customer', { exact: true }).fill(customer);
      // A stalled order moves between Pending and Processing; each bulk run takes one state.
      for (let round = 0; cancelled.size < mine.size && round < 12; round++) {
        await page
          .getByLabel('State', { exact: true })
          .selectOption(round % 2 === 0 ? 'Pending' : 'Processing');
        await page.getByRole('button', { name: 'Preview' }).click();
        const preview = page.locator('#bulk-preview');
        await preview.waitFor();
        const listed = await preview.locator('ul.ids code').allInnerTexts();
        for (const id of listed) assert.ok(mine.has(id), `the filter matched ${id}, not this customer's`);
        if (listed.length === 0) continue;
        await preview.getByRole('button', { name: /Cancel \d+ orders/ }).click();
        const dialog = page.getByRole('dialog');
        await dialog.getByRole('button', { name: /^Cancel \d+ orders$/ }).click();
        const results = page.locator('#bulk-results');
        await results.waitFor();
        assert.match(await page.locator('#results-title').innerText(), /^Cancel: \d+ of \d+ accepted$/);
        for (const row of await results.locator('tbody tr').all()) {
          const id = (await row.getAttribute('data-order-id'))!;
          assert.ok(mine.has(id));
          if ((await row.locator('td').nth(1).innerText()) === '202') cancelled.add(id);
        }
      }
      assert.deepEqual([...cancelled].sort(), [...mine].sort());
    } finally {
      stack.remote.payment.setFaults({});
    }
    for (const id of mine) {
      const view = await api.until(id, terminal, 90_000);
      assert.equal(view.processState, 'Compensated');
      assert.equal(view.compensationReason, 'cancelled');
    }
    assert.equal(
      (await api.until(bystander, terminal, 90_000)).processState,
      'Processed',
      'not in the filter',
    );
  });

  it("shows a dead-lettered message, redrives it, and the order's history records the redrive", async () => {
    // A downstream consumer of order-status could not process an event about this order.
    const messageId = `console-${randomUUID()}`;
    const sender = bus.createSender('order-status');
    await sender.sendMessages({
      messageId,
      correlationId: processedOrder,
      contentType: 'application/json',
      body: { orderId: processedOrder, processState: 'Processed' },
    });
    await sender.close();
    const receiver = bus.createReceiver('order-status', 'all');
    try {
      const mine = await waitFor('the event on the subscription', async () => {
        for (const m of await receiver.receiveMessages(50, { maxWaitTimeInMs: 1000 })) {
          if (m.messageId === messageId) return m;
          await receiver.completeMessage(m);
        }
        return undefined;
      });
      await receiver.deadLetterMessage(mine, {
        deadLetterReason: 'ConsumerRejected',
        deadLetterErrorDescription: 'the billing system could not read it',
      });
    } finally {
      await receiver.close();
    }
    await openScreen(page, stack.baseUrl, '#/deadletters');
    await page.getByRole('link', { name: 'order-status/subscriptions/all' }).click();
    const row = page.locator(`#dead-letter-messages tr[data-order-id="${processedOrder}"]`);
    await row.waitFor();
    assert.match(await row.innerText(), /ConsumerRejected/);
    assert.match(await row.innerText(), /billing system/);
    await row.getByRole('checkbox').check();
    await page.getByRole('button', { name: 'Redrive selected (1)' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Redrive 1 messages' }).click();
    await page
      .locator('#dead-letter-results')
      .getByText(/redriven/)
      .waitFor();
    await openScreen(page, stack.baseUrl, `#/orders/${processedOrder}`);
    await page
      .locator('#timeline li.operator', { hasText: /redriven/i })
      .first()
      .waitFor();
  });
});
