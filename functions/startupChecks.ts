import { app } from '@azure/functions';
import { SettingsError } from '../shared/config/settings.js';
import { dependencies } from '../shared/app/runtime.js';
import { consoleSink, logger } from '../shared/observability/logger.js';

/** How long start-up waits for the stores before it lets the host start anyway. */
const waitMs = 15_000;

/**
 * Not a function: builds the dependencies when the app starts, so a setting that only storage can
 * judge (StateStoreAccounts listing fewer accounts than orders are stored across; a waiting step
 * without CALLBACK_SIGNING_KEYS) fails the start naming it, instead of answering 500 to every
 * request. Storage being down or slow is not bad configuration: the host starts, and the first
 * invocation tries again (runtime.ts does not keep a failed build).
 */
app.hook.appStart(async () => {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), waitMs);
  });
  try {
    await Promise.race([dependencies(), late]);
  } catch (e) {
    if (e instanceof SettingsError) throw e;
    logger(consoleSink).warn('the stores could not be opened at start-up; the first invocation tries again', {
      error: (e as Error).message,
    });
  } finally {
    clearTimeout(timer);
  }
});
