/**
 * The namespace: queues, topics with subscriptions, and their dead-letter queues, addressed the
 * way the SDK addresses them. It assigns sequence numbers, applies duplicate detection,
 * subscription filters, forwarding and time-to-live, and drives every store's timers from one
 * ticker so idle entities cost nothing.
 */
import { plainValue } from './wireTypes.js';
import { randomUUID } from 'node:crypto';
import type { Message } from 'rhea';
import type {
  CorrelationFilter,
  DuplicateDetectionConfig,
  NamespaceConfig,
  RuleConfig,
  StoreConfig,
  SubscriptionConfig,
} from './config.js';
import { MessageStore, type StoredMessage, type StoreCounters } from './message-store.js';
import { applySqlAction, sqlMatches } from './sql-filter.js';

export class EntityError extends Error {
  constructor(
    readonly condition: string,
    message: string,
  ) {
    super(message);
  }
}

/** A queue or a subscription: an active store plus its dead-letter queue. */
export interface ReceivableEntity {
  kind: 'queue' | 'subscription';
  path: string;
  config: StoreConfig;
  active: MessageStore;
  deadLetter: MessageStore;
}

/** Something a sender can address: a queue or a topic. */
export interface SendTarget {
  kind: 'queue' | 'topic';
  path: string;
  defaultTtlMs: number;
  duplicateDetection: DuplicateDetectionConfig;
  nextSeq: number;
  /** messageId -> time first seen; Map order is arrival order, so pruning pops from the front. */
  seenIds: Map<string, number>;
  queue?: ReceivableEntity;
  subscriptions?: Array<{ entity: ReceivableEntity; rules: RuleConfig[] }>;
  sent: number;
  duplicates: number;
}

export interface EntityCounters extends StoreCounters {
  path: string;
  activeMessages: number;
  deadLetterMessages: number;
}

const TICK_MS = 100;

/** Max hops through ForwardTo chains, as a guard against cycles (Azure allows 4). */
const MAX_FORWARD_HOPS = 4;

export class Namespace {
  private readonly targets = new Map<string, SendTarget>();
  private readonly receivables = new Map<string, ReceivableEntity>();
  private readonly ticker: NodeJS.Timeout;
  /** Persistence hooks in here: a message changed in a store (see MessageStore.onChange). */
  onMessageChange: (store: MessageStore, seq: number) => void = () => {};
  /** Persistence hooks in here: a target took a sequence number, or remembered a message id. */
  onTargetChange: (target: SendTarget, seenIdKey?: string) => void = () => {};
  /**
   * Runs `done` once every change made so far is durable; the server acknowledges sends and
   * settlements through it. Without persistence there is nothing to wait for.
   */
  afterDurable: (done: (err?: Error) => void) => void = (done) => done();

  constructor(readonly config: NamespaceConfig) {
    for (const q of config.queues) {
      const entity = this.createReceivable('queue', q.name, q);
      this.targets.set(q.name.toLowerCase(), {
        kind: 'queue',
        path: q.name,
        defaultTtlMs: q.defaultTtlMs,
        duplicateDetection: q.duplicateDetection,
        nextSeq: 1,
        seenIds: new Map(),
        queue: entity,
        sent: 0,
        duplicates: 0,
      });
    }
    for (const t of config.topics) {
      this.targets.set(t.name.toLowerCase(), {
        kind: 'topic',
        path: t.name,
        defaultTtlMs: t.defaultTtlMs,
        duplicateDetection: t.duplicateDetection,
        nextSeq: 1,
        seenIds: new Map(),
        subscriptions: t.subscriptions.map((s: SubscriptionConfig) => ({
          entity: this.createReceivable('subscription', `${t.name}/Subscriptions/${s.name}`, s),
          rules: s.rules,
        })),
        sent: 0,
        duplicates: 0,
      });
    }
    this.ticker = setInterval(() => this.tick(), TICK_MS);
    this.ticker.unref();
  }

  private createReceivable(
    kind: 'queue' | 'subscription',
    path: string,
    config: StoreConfig,
  ): ReceivableEntity {
    const active = new MessageStore(path, {
      lockDurationMs: config.lockDurationMs,
      maxDeliveryCount: config.maxDeliveryCount,
      deadLetterOnExpiration: config.deadLetterOnExpiration,
      isDeadLetterQueue: false,
    });
    const deadLetter = new MessageStore(`${path}/$DeadLetterQueue`, {
      lockDurationMs: config.lockDurationMs,
      maxDeliveryCount: config.maxDeliveryCount,
      deadLetterOnExpiration: false,
      isDeadLetterQueue: true,
    });
    const entity: ReceivableEntity = { kind, path, config, active, deadLetter };
    active.deadLetterSink = (msg) => this.deadLetter(entity, msg);
    active.onChange = (seq) => this.onMessageChange(active, seq);
    deadLetter.onChange = (seq) => this.onMessageChange(deadLetter, seq);
    this.receivables.set(path.toLowerCase(), entity);
    return entity;
  }

  private deadLetter(entity: ReceivableEntity, msg: StoredMessage): void {
    msg.deadLetterSource = entity.path;
    const forward = entity.config.forwardDeadLetteredTo;
    if (forward) {
      const target = this.targets.get(forward.toLowerCase());
      if (target) {
        // A forwarded dead letter is a new message at the target, as in Azure.
        this.accept(target, cloneAmqp(msg.amqp), Date.now(), 1);
        return;
      }
    }
    entity.deadLetter.enqueue(msg);
  }

  /** Resolves a receive or management address to a store: queue, subscription, or a DLQ of either. */
  resolveStore(
    address: string,
    host?: string,
  ): { entity: ReceivableEntity; store: MessageStore; subQueue: boolean } {
    const clean = address.replace(/^\/+/, '');
    const m = /^(.*)\/\$deadletterqueue$/i.exec(clean);
    const base = (m ? m[1] : clean).toLowerCase();
    if (/\/\$transfer$/i.test(base))
      throw this.notImplemented(
        `transfer dead-letter queues are not supported by this emulator (${address})`,
      );
    const entity = this.receivables.get(base);
    if (!entity) throw this.notFound(address, host);
    return { entity, store: m ? entity.deadLetter : entity.active, subQueue: Boolean(m) };
  }

  /** Resolves a send address: a queue or topic. */
  hasSendTarget(address: string): boolean {
    return this.targets.has(address.replace(/^\/+/, '').toLowerCase());
  }

  /** True when the address names anything a link may attach to (send target or receivable). */
  knows(address: string): boolean {
    if (this.hasSendTarget(address)) return true;
    try {
      this.resolveStore(address);
      return true;
    } catch {
      return false;
    }
  }

  /** Azure's wording, naming the host the client connected to (the AMQP open frame's hostname). */
  notFound(address: string, host = 'localhost'): EntityError {
    return new EntityError(
      'amqp:not-found',
      `The messaging entity 'sb://${host}/${address.replace(/^\/+/, '')}' could not be found. To know more visit https://aka.ms/sbResourceMgrExceptions.`,
    );
  }

  notImplemented(what: string): EntityError {
    return new EntityError('amqp:not-implemented', what);
  }

  /** Checks a message against the entity's rules before it is accepted, as Azure does at send. */
  validateSend(address: string, amqp: Message): void {
    const target = this.targets.get(address.replace(/^\/+/, '').toLowerCase());
    if (!target) throw this.notFound(address);
    if (target.queue?.config.requiresSession && (amqp.group_id === undefined || amqp.group_id === null)) {
      throw new EntityError(
        'amqp:not-allowed',
        `The SessionId was not set on a message, and it cannot be sent to the entity. Entities that have session support enabled can only receive messages that have the SessionId set to a valid value. Reference: ${target.path}`,
      );
    }
  }

  /**
   * Accepts one message sent to a queue or topic. Returns its sequence numbers by store path
   * (empty when it was a duplicate or matched no subscription).
   */
  send(address: string, amqp: Message, now = Date.now()): number | undefined {
    const target = this.targets.get(address.replace(/^\/+/, '').toLowerCase());
    if (!target) throw this.notFound(address);
    return this.accept(target, amqp, now, 0);
  }

  private accept(target: SendTarget, amqp: Message, now: number, hops: number): number | undefined {
    // Azure gives every message an id; the SDK's lock renewer relies on it.
    if (amqp.message_id === undefined || amqp.message_id === null)
      amqp.message_id = randomUUID().replace(/-/g, '');
    if (target.duplicateDetection.enabled && amqp.message_id !== undefined && amqp.message_id !== null) {
      const seen = target.seenIds;
      const horizon = now - target.duplicateDetection.windowMs;
      for (const [id, at] of seen) {
        if (at > horizon) break;
        seen.delete(id);
      }
      const key = messageIdKey(amqp.message_id);
      if (seen.has(key)) {
        target.duplicates++;
        return undefined;
      }
      seen.set(key, now);
      this.onTargetChange(target, key);
    }
    target.sent++;
    const seq = target.nextSeq++;
    this.onTargetChange(target);
    const scheduledRaw = amqp.message_annotations?.['x-opt-scheduled-enqueue-time'];
    const scheduledAt =
      scheduledRaw !== undefined && scheduledRaw !== null ? toMillis(scheduledRaw) : undefined;
    const msgTtl = typeof amqp.ttl === 'number' && amqp.ttl > 0 ? amqp.ttl : Infinity;
    const deliver = (entity: ReceivableEntity, body: Message): void => {
      const ttl = Math.min(msgTtl, entity.config.defaultTtlMs, target.defaultTtlMs);
      const stored: StoredMessage = {
        seq,
        amqp: body,
        enqueuedTime: now,
        expiresAt: now + ttl,
        deliveryCount: 0,
        state: scheduledAt !== undefined && scheduledAt > now ? 'scheduled' : 'active',
        // Only a message really held back is "scheduled" (and stays so once due); one whose
        // enqueue time has passed is enqueued as it comes, as Service Bus does.
        scheduledAt: scheduledAt !== undefined && scheduledAt > now ? scheduledAt : undefined,
      };
      const forward = entity.config.forwardTo;
      if (forward && hops < MAX_FORWARD_HOPS) {
        const next = this.targets.get(forward.toLowerCase());
        if (next) {
          this.accept(next, body, now, hops + 1);
          return;
        }
      }
      entity.active.enqueue(stored, now);
    };
    if (target.queue) {
      deliver(target.queue, amqp);
    } else {
      for (const sub of target.subscriptions ?? []) {
        let copy: Message | undefined;
        // One copy per subscription however many rules match; each matching rule's action applies to it, in rule order.
        for (const rule of sub.rules) {
          if (!matches(rule, amqp)) continue;
          copy ??= cloneAmqp(amqp);
          if (rule.action) applySqlAction(rule.action.statements, copy);
        }
        if (copy) deliver(sub.entity, copy);
      }
    }
    return seq;
  }

  /** Schedules messages through $management; returns their sequence numbers. */
  schedule(address: string, messages: Message[], now = Date.now()): number[] {
    return messages.map((m) => {
      this.validateSend(address, m);
      const seq = this.send(address, m, now);
      // A duplicate still gets a sequence number in Azure; reuse the next one without storing.
      return seq ?? this.targets.get(address.toLowerCase())!.nextSeq - 1;
    });
  }

  cancelScheduled(address: string, seqs: number[]): void {
    const target = this.targets.get(address.replace(/^\/+/, '').toLowerCase());
    if (!target) throw this.notFound(address);
    if (target.queue) target.queue.active.cancelScheduled(seqs);
    for (const sub of target.subscriptions ?? []) sub.entity.active.cancelScheduled(seqs);
  }

  private tick(): void {
    const now = Date.now();
    for (const e of this.receivables.values()) {
      e.active.tick(now);
      e.deadLetter.tick(now);
    }
  }

  counters(): EntityCounters[] {
    const out: EntityCounters[] = [];
    for (const e of this.receivables.values()) {
      out.push({
        path: e.path,
        ...e.active.counters,
        activeMessages: e.active.messages.size,
        deadLetterMessages: e.deadLetter.messages.size,
      });
    }
    return out;
  }

  sendCounters(): Array<{ path: string; sent: number; duplicates: number }> {
    return [...this.targets.values()].map((t) => ({ path: t.path, sent: t.sent, duplicates: t.duplicates }));
  }

  allReceivables(): ReceivableEntity[] {
    return [...this.receivables.values()];
  }

  allTargets(): SendTarget[] {
    return [...this.targets.values()];
  }

  close(): void {
    clearInterval(this.ticker);
  }
}

function messageIdKey(id: unknown): string {
  if (Buffer.isBuffer(id)) return `b:${id.toString('hex')}`;
  return `${typeof id}:${String(id)}`;
}

export function toMillis(value: unknown): number {
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'number') return value;
  return new Date(String(value)).getTime();
}

function cloneAmqp(m: Message): Message {
  return {
    ...m,
    application_properties: m.application_properties ? { ...m.application_properties } : undefined,
    message_annotations: m.message_annotations ? { ...m.message_annotations } : undefined,
  };
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === undefined || a === null || b === undefined || b === null) return false;
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  return String(a) === String(b);
}

function matchesCorrelation(f: CorrelationFilter, m: Message): boolean {
  const checks: Array<[unknown, unknown]> = [
    [f.correlationId, m.correlation_id],
    [f.messageId, m.message_id],
    [f.to, m.to],
    [f.replyTo, m.reply_to],
    [f.subject, m.subject],
    [f.sessionId, m.group_id],
    [f.replyToSessionId, m.reply_to_group_id],
    [f.contentType, m.content_type],
  ];
  for (const [want, got] of checks) if (want !== undefined && !sameValue(want, got)) return false;
  for (const [key, want] of Object.entries(f.properties ?? {})) {
    if (!sameValue(want, plainValue(m.application_properties?.[key]))) return false;
  }
  return true;
}

function matches(rule: RuleConfig, m: Message): boolean {
  switch (rule.filter.kind) {
    case 'true':
      return true;
    case 'false':
      return false;
    case 'correlation':
      return matchesCorrelation(rule.filter.filter, m);
    case 'sql':
      return sqlMatches(rule.filter.expr, m);
  }
}
