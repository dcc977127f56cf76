// Takes the screenshots in docs/operations.md: the console's dashboard, an order page, the service
// limits and retention screens, in
// Chromium (/usr/bin/chromium, or CHROMIUM_PATH), against the local stack on random ports with
// a few orders of each kind of fault. Run after `npm run build`: npm run console:screenshots
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const { startStack, randomPorts } = require('../dist/local/stack.js');
const { demoStackSettings } = require('../dist/local/demo.js');
const { faultScenarios, timingFromSettings } = require('../dist/local/faultScenarios.js');
const { orderApiClient, sampleOrder, waitForTerminal } = require('../dist/local/orderClient.js');

const out = 'docs/images';
mkdirSync(out, { recursive: true });
// Payment limited, so the service-limits screen has a limit to show.
const stack = await startStack({
  ports: randomPorts,
  settings: { ...demoStackSettings, PAYMENT_MAX_CALLS_PER_SECOND: '5', PAYMENT_MAX_CONCURRENT_CALLS: '2' },
});
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
try {
  const client = orderApiClient(stack.baseUrl, stack.functionKey);
  const scenarios = faultScenarios(timingFromSettings(stack.env), false);
  const submitted = [];
  for (let round = 0; round < 3; round++) {
    for (const [i, s] of scenarios.entries()) {
      submitted.push({ kind: s.kind, ...(await client.submit(sampleOrder(`shot-${round}-${i}`, s.skus))) });
    }
  }
  const finals = await waitForTerminal(
    client,
    submitted.map((s) => s.orderId),
    { deadline: Date.now() + 180_000, pollMs: 500 },
  );
  // A few still in flight, so the dashboard shows its in-flight card.
  for (let i = 0; i < 3; i++) await client.submit(sampleOrder(`shot-live-${i}`, ['FAULT:payment:hang:2']));

  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  await page.goto(`${stack.baseUrl}/console`);
  await page.getByLabel('Operator key').fill(stack.operatorKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#state-counts').waitFor();
  await page.locator('#throughput .summary', { hasText: 'orders finished' }).waitFor();
  await page.locator('#dead-letter-counts').waitFor();
  await page.screenshot({ path: `${out}/console-dashboard.png`, fullPage: true });

  const compensated = submitted.find(
    (s) => s.kind === 'compensation-transient' && finals.get(s.orderId)?.processState === 'Compensated',
  );
  const shown = compensated ?? submitted[0];
  await page.goto(`${stack.baseUrl}/console#/orders/${shown.orderId}`);
  await page.locator('#timeline li').first().waitFor();
  await page.screenshot({ path: `${out}/console-order.png`, fullPage: true });

  await page.goto(`${stack.baseUrl}/console#/services`);
  await page.locator('#service-limits').waitFor();
  await page.screenshot({ path: `${out}/console-service-limits.png`, fullPage: true });
  // One order under a legal hold, so the retention screen lists one.
  await fetch(`${stack.baseUrl}/orders/${submitted[0].orderId}/hold?reason=audit%202026`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${stack.operatorKey}` },
  });
  await page.goto(`${stack.baseUrl}/console#/retention`);
  await page.locator('#held-orders').waitFor();
  await page.screenshot({ path: `${out}/console-retention.png`, fullPage: true });
  console.log(
    `wrote ${out}/console-dashboard.png, console-order.png (order ${shown.orderId}), console-service-limits.png and console-retention.png`,
  );
} finally {
  await browser.close();
  await stack.stop();
}
