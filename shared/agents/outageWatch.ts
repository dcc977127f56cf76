import type { Logger } from '../observability/logger.js';
import {
  afterAnswer,
  afterFailure,
  healthyService,
  type Clock,
  type ServiceFailure,
  type ServiceHealth,
} from '../domain/index.js';
import type { MessageBus } from '../messaging/bus.js';
import type { OperatorAlert } from '../messaging/contracts.js';
import { queues } from '../messaging/entities.js';
import { HealthWriteConflict, type ServiceHealthTable } from '../stateStore/serviceHealthTable.js';

/**
 * The Agents' outage alarm: counts consecutive operational failures per service in the shared
 * health row and raises one operator alert per outage (on the operator-alerts queue, like an
 * order's alert, and in the error log). An answer closes the outage, so the next one alerts again.
 */
export interface OutageWatch {
  /** `log`: the failing invocation's; the alert's error line goes there when this failure raises it. */
  failed(service: string, failure: ServiceFailure, log?: Logger): Promise<void>;
  answered(service: string): Promise<void>;
}

export interface OutageWatchOptions {
  /** Consecutive failures that make an outage (SERVICE_OUTAGE_ALERT_THRESHOLD). */
  threshold: number;
  /**
   * An Agent that saw no failure itself still re-reads the row this often after an answer, so an
   * outage whose failing Agents all went away is closed by whoever answers next.
   */
  recheckMs?: number;
  /** Reads-and-writes before giving up on one record (concurrent Agents). */
  maxConflicts?: number;
  onAlert?: (alert: OperatorAlert) => void;
}

export function outageAlertMessageId(service: string, outage: number): string {
  return `service-outage:${service}:${outage}`;
}

type HealthEvent = { kind: 'failed'; failure: ServiceFailure; log?: Logger } | { kind: 'answered' };

export class ServiceOutageWatch implements OutageWatch {
  /** Services this process saw fail since it last closed (or found closed) their record. */
  private readonly failing = new Set<string>();
  private readonly checkedAt = new Map<string, number>();
  /** Events not yet written, per service, and the one flush per service that writes them. */
  private readonly pending = new Map<string, HealthEvent[]>();
  private readonly flushing = new Map<string, Promise<void>>();

  constructor(
    /** A promise while the table is still being opened: an Agent never waits for it to call. */
    private readonly table: ServiceHealthTable | Promise<ServiceHealthTable>,
    private readonly bus: MessageBus,
    private readonly clock: Clock,
    private readonly options: OutageWatchOptions,
  ) {
    if (!Number.isInteger(options.threshold) || options.threshold < 1) {
      throw new RangeError('outage alert threshold must be an integer >= 1');
    }
  }

  failed(service: string, failure: ServiceFailure, log?: Logger): Promise<void> {
    this.failing.add(service);
    return this.record(service, { kind: 'failed', failure, ...(log ? { log } : {}) });
  }

  answered(service: string): Promise<void> {
    const now = this.clock.now().getTime();
    const recheckMs = this.options.recheckMs ?? 60_000;
    if (!this.failing.has(service) && now - (this.checkedAt.get(service) ?? 0) < recheckMs) {
      return Promise.resolve();
    }
    this.checkedAt.set(service, now);
    this.failing.delete(service);
    return this.record(service, { kind: 'answered' });
  }

  /**
   * Queues the event and makes sure one flush per service is writing: every Agent of a service
   * shares one row, so a process writes it one batch at a time instead of racing itself for the
   * ETag (under an outage all its Agents fail at once).
   */
  private record(service: string, event: HealthEvent): Promise<void> {
    const queue = this.pending.get(service) ?? [];
    queue.push(event);
    this.pending.set(service, queue);
    return this.kick(service);
  }

  private kick(service: string): Promise<void> {
    const current = this.flushing.get(service);
    if (current) return current;
    const running = this.flush(service).finally(() => {
      this.flushing.delete(service);
      // An event queued as the flush was ending: write it too.
      if (this.pending.has(service)) this.kick(service).catch(() => undefined);
    });
    this.flushing.set(service, running);
    return running;
  }

  private async flush(service: string): Promise<void> {
    for (let batch = this.take(service); batch.length > 0; batch = this.take(service)) {
      let owed: ServiceHealth | undefined;
      let owedLog: Logger | undefined;
      const written = await this.update(service, (h) => {
        owed = undefined;
        let health = h;
        let changed = false;
        for (const event of batch) {
          if (event.kind === 'failed') {
            const next = afterFailure(health, event.failure, this.clock.now(), this.options.threshold);
            health = next.health;
            changed = true;
            if (next.alert) {
              owed = health;
              owedLog = event.log;
            }
          } else {
            const closed = afterAnswer(health);
            if (closed) {
              health = closed;
              changed = true;
            }
          }
        }
        return changed ? { health, alert: owed !== undefined } : undefined;
      });
      if (!written || !owed) continue;
      const alerted = owed;
      await this.sendAlert(service, alerted, owedLog);
      // Best effort: a lost race here only means another writer may send the (deduplicated) alert again.
      await this.update(service, (h) =>
        h.open && h.outages === alerted.outages && !h.alertSent
          ? { health: { ...h, alertSent: true }, alert: false }
          : undefined,
      ).catch(() => undefined);
    }
  }

  private take(service: string): HealthEvent[] {
    const batch = this.pending.get(service) ?? [];
    this.pending.delete(service);
    return batch;
  }

  /** Read, decide, write with the ETag; on a conflict read again. `decide` undefined = no write. */
  private async update(
    service: string,
    decide: (h: ServiceHealth) => { health: ServiceHealth; alert: boolean } | undefined,
  ): Promise<{ health: ServiceHealth; alert: boolean } | undefined> {
    const max = this.options.maxConflicts ?? 20;
    const table = await this.table;
    for (let i = 0; i < max; i++) {
      const stored = await table.read(service);
      const decision = decide(stored?.health ?? { ...healthyService });
      if (!decision) return undefined;
      try {
        await table.write(service, decision.health, stored?.etag ?? null);
        return decision;
      } catch (e) {
        if (!(e instanceof HealthWriteConflict)) throw e;
      }
    }
    throw new Error(`service health of ${service}: ${max} concurrent-write conflicts in a row`);
  }

  private async sendAlert(service: string, health: ServiceHealth, log: Logger | undefined): Promise<void> {
    const status = health.lastStatus === null ? 'no answer' : `HTTP ${health.lastStatus}`;
    const alert: OperatorAlert = {
      type: 'operator-alert',
      orderId: `service:${service}`,
      reason:
        `ServiceOutage: ${service} failed ${health.consecutiveFailures} calls in a row since ` +
        `${health.since?.toISOString() ?? '?'} (${status}): ${health.lastDetail ?? ''}`.slice(0, 2000),
      service,
      ...(health.lastStatus !== null ? { status: health.lastStatus } : {}),
      consecutiveFailures: health.consecutiveFailures,
      at: this.clock.now().toISOString(),
    };
    this.options.onAlert?.(alert);
    // The alert's second channel, as for an order's (commandMessages.ts): the error line that
    // host.json keeps out of sampling and alerts.bicep's operator-alert rule queries.
    log?.error('operator alert', {
      orderId: alert.orderId,
      code: 'ServiceOutage',
      service,
      ...(alert.status !== undefined ? { status: alert.status } : {}),
      reason: alert.reason,
    });
    await this.bus.send(queues.operatorAlerts, [
      {
        messageId: outageAlertMessageId(service, health.outages),
        body: alert,
        subject: 'ServiceOutage',
        correlationId: alert.orderId,
        applicationProperties: { service },
      },
    ]);
  }
}
