import { Cron } from 'croner';
import type { RegisteredFunction } from './coreApi.js';
import { InvocationError, type Invoker } from './invoker.js';
import type { LogSink } from './logger.js';
import { runWithRetry, type RetryPolicyOptions } from './retryPolicy.js';
import { parseTimeSpan } from './settings.js';

/** When a schedule fires next: NCRONTAB (six fields, UTC) or a TimeSpan interval. */
export interface TimerSchedule {
  text: string;
  nextAfter(date: Date): Date;
}

/**
 * Parses the schedule the way the host does: `{second} {minute} {hour} {day} {month} {day-of-week}`
 * in UTC, day and day-of-week both required to match (NCrontab), or `hh:mm:ss` for a fixed interval.
 */
export function parseSchedule(text: string, functionName: string): TimerSchedule {
  const trimmed = text.trim();
  if (/^(\d+\.)?\d{1,2}:\d{2}:\d{2}$/.test(trimmed)) {
    const interval = parseTimeSpan(trimmed, `Function "${functionName}" schedule`);
    if (interval <= 0) throw new Error(`Function "${functionName}": schedule interval must be positive.`);
    return { text: trimmed, nextAfter: (date) => new Date(date.getTime() + interval) };
  }
  const fields = trimmed.split(/\s+/);
  if (fields.length !== 6) {
    throw new Error(
      `Function "${functionName}": schedule "${text}" must have six fields {second} {minute} {hour} {day} {month} {day-of-week}.`,
    );
  }
  let cron: Cron;
  try {
    cron = new Cron(trimmed, { paused: true, timezone: 'UTC', mode: '6-part', domAndDow: true });
  } catch (err) {
    throw new Error(
      `Function "${functionName}": schedule "${text}" is not a valid NCRONTAB expression: ${(err as Error).message}`,
    );
  }
  return {
    text: trimmed,
    nextAfter: (date) => {
      const next = cron.nextRun(date);
      if (!next) throw new Error(`Function "${functionName}": schedule "${text}" never fires.`);
      return next;
    },
  };
}

const maxTimeout = 2 ** 31 - 1;

/**
 * One timer function. Invocations run one after another, never overlapping (the Azure host holds a
 * singleton lock per timer); occurrences that pass while an invocation runs are skipped and the
 * next one is computed from the time it finished.
 */
export class TimerTrigger {
  private timeout: NodeJS.Timeout | undefined;
  private stopped = false;
  private running: Promise<void> | undefined;
  private last: Date | undefined;
  /** Cancels a retry's wait when the host stops. */
  private readonly stopSignal = new AbortController();

  constructor(
    private readonly fn: RegisteredFunction,
    private readonly schedule: TimerSchedule,
    private readonly runOnStartup: boolean,
    private readonly invoker: Invoker,
    private readonly log: LogSink,
    private readonly retry?: RetryPolicyOptions,
  ) {}

  get name(): string {
    return this.fn.metadata.name;
  }

  start(): void {
    if (this.runOnStartup) {
      void this.fire(new Date(), 'IsPastDue');
    } else {
      this.arm();
    }
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timeout);
    this.stopSignal.abort();
  }

  nextOccurrence(): Date {
    return this.schedule.nextAfter(new Date());
  }

  private arm(): void {
    if (this.stopped) return;
    const next = this.schedule.nextAfter(new Date());
    const wait = (): void => {
      const remaining = next.getTime() - Date.now();
      if (remaining > maxTimeout) {
        this.timeout = setTimeout(wait, maxTimeout);
      } else {
        this.timeout = setTimeout(
          () => void this.fire(next, `Timer fired at ${new Date().toISOString()}`),
          Math.max(0, remaining),
        );
      }
    };
    wait();
  }

  private async fire(scheduled: Date, reason: string): Promise<void> {
    if (this.stopped || this.running) return;
    const now = new Date();
    const next = this.schedule.nextAfter(now);
    // Past due when the occurrence is older than the one after it would have been (a missed tick).
    const isPastDue =
      reason === 'IsPastDue' ? false : this.schedule.nextAfter(scheduled).getTime() <= now.getTime();
    const timer = {
      Schedule: { AdjustForDST: true },
      ScheduleStatus: {
        Last: (this.last ?? scheduled).toISOString(),
        Next: next.toISOString(),
        LastUpdated: now.toISOString(),
      },
      IsPastDue: isPastDue,
    };
    this.last = scheduled;
    const data = { json: JSON.stringify(timer) };
    this.running = this.occurrence(data, reason).catch((err: unknown) => {
      // The failure is already logged by the invoker; a timer just waits for its next occurrence.
      if (!(err instanceof InvocationError)) {
        this.log({ level: 'error', category: 'host', functionName: this.name, message: String(err) });
      }
    });
    await this.running;
    this.running = undefined;
    this.arm();
  }

  /** One occurrence: a single invocation, or as many as the retry policy allows while it fails. */
  private async occurrence(data: { json: string }, reason: string): Promise<void> {
    const policy = this.retry;
    if (!policy) {
      await this.invoker.invoke(this.fn, { data, reason });
      return;
    }
    try {
      await runWithRetry(
        policy,
        async (retryContext) => {
          if (retryContext.retryCount > 0) {
            this.log({
              level: 'information',
              category: 'host',
              functionName: this.name,
              message: `Retrying 'Functions.${this.name}' (retry ${retryContext.retryCount} of ${policy.maxRetryCount === -1 ? 'unlimited' : policy.maxRetryCount}, ${policy.strategy})`,
            });
          }
          try {
            await this.invoker.invoke(this.fn, { data, reason, retryContext });
          } catch (err) {
            // The handler's own error is what the next attempt's retryContext.exception shows.
            throw err instanceof InvocationError ? err.cause : err;
          }
        },
        this.stopSignal.signal,
      );
    } catch (err) {
      if (this.stopped) return;
      this.log({
        level: 'error',
        category: 'host',
        functionName: this.name,
        message: `'Functions.${this.name}' failed after ${policy.maxRetryCount} retries; waiting for its next occurrence. Last error: ${(err as Error).message}`,
      });
    }
  }
}
