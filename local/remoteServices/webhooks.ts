import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The demo services' webhook mode (issue 25): a request that carries `callbackUrl` is accepted
 * with 202 and its outcome POSTed to that URL later, as a payment provider confirms a charge.
 * Delivery is at-least-once: retried on network errors and 5xx (a host that died mid-callback),
 * never on 2xx or 4xx. Faults for chaos runs: copies (duplicates), loss, early (before the 202).
 */
export interface WebhookRecord {
  url: string;
  outcome: string;
  /** The HTTP status of each try, or 0 for a network error. */
  statuses: number[];
  /**
   * The network error of each try that had one (e.g. ECONNREFUSED: nobody listened; ECONNRESET or
   * UND_ERR_SOCKET: the host took the request and died before it answered).
   */
  errors?: string[];
}

export interface WebhookOptions {
  delayMs: number;
  copies: number;
  signal: AbortSignal;
  log?: (line: string) => void;
}

export class WebhookSender {
  readonly sent: WebhookRecord[] = [];

  /** A callback lost on purpose (a chaos fault) is listed with no tries, so a test can send it. */
  recordLost(url: string): void {
    this.sent.push({ url, outcome: 'lost', statuses: [] });
  }

  /** POSTs `body` to `url` `copies` times (each delivered until a 2xx or 4xx, 6 tries at most). */
  async deliver(url: string, body: Record<string, unknown>, options: WebhookOptions): Promise<void> {
    try {
      await sleep(options.delayMs, undefined, { signal: options.signal });
      for (let copy = 0; copy < options.copies; copy++) await this.once(url, body, options);
    } catch {
      // the service stopped
    }
  }

  private async once(url: string, body: Record<string, unknown>, options: WebhookOptions): Promise<void> {
    const record: WebhookRecord = { url, outcome: String(body.outcome), statuses: [] };
    this.sent.push(record);
    if (this.sent.length > 5000) this.sent.shift();
    for (let attempt = 0; attempt < 6; attempt++) {
      let status = 0;
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
          signal: AbortSignal.any([options.signal, AbortSignal.timeout(10_000)]),
        });
        status = response.status;
        await response.arrayBuffer();
      } catch (e) {
        if (options.signal.aborted) return;
        const cause = (e as { cause?: { code?: string } }).cause;
        (record.errors ??= []).push(cause?.code ?? (e as Error).name);
      }
      record.statuses.push(status);
      if (status >= 200 && status < 500) return;
      await sleep(Math.min(8000, 250 * 2 ** attempt), undefined, { signal: options.signal });
    }
    options.log?.(`webhook to ${url.slice(0, 80)}... gave up after 6 tries`);
  }
}
