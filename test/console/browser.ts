import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

/**
 * Real Chromium (Debian's `chromium` package) driven by playwright-core. No browser download and
 * no skipping: a machine without it fails here, saying how to install it.
 */
export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(chromiumPath)) {
    throw new Error(
      `Chromium is missing at ${chromiumPath}: the console's browser tests need it. Install it with \`apt-get install -y chromium\` (as .ci/run does) or set CHROMIUM_PATH.`,
    );
  }
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/** Opens the console, refused, and signs in with the operator key from the keyboard. */
export async function signIn(page: Page, baseUrl: string, operatorKey: string): Promise<void> {
  await page.goto(`${baseUrl}/console`);
  const key = page.getByLabel('Operator key');
  await key.focus();
  await page.keyboard.type(operatorKey);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
}

/** The console's own address for a screen (`#/orders/{id}`, `#/deadletters`...). */
export async function openScreen(page: Page, baseUrl: string, hash: string): Promise<void> {
  await page.goto(`${baseUrl}/console${hash}`);
}
