/**
 * One message store: the active part of a queue or subscription, or its dead-letter queue.
 * It owns peek-lock semantics (locks, delivery count, MaxDeliveryCount), deferral, scheduling
 * and time-to-live. Delivery order is by sequence number, and every hot path is O(log n):
 * available messages, scheduled messages, expiries and lock expiries each sit in a min-heap
 * whose stale entries are skipped when popped.
 */
import { randomUUID } from 'node:crypto';
import type { Message } from 'rhea';
import { MinHeap } from './heap.js';

export type MessageState = 'active' | 'deferred' | 'scheduled';

export interface StoredMessage {
  seq: number;
  /** The message as the client sent it (properties, annotations, body), before broker annotations. */
  amqp: Message;
  enqueuedTime: number;
  /** Absolute expiry in ms since epoch; Infinity when the message never expires. */
  expiresAt: number;
  /** Prior failed delivery attempts: AMQP header.delivery_count, what the SDK shows as deliveryCount. */
  deliveryCount: number;
  state: MessageState;
  scheduledAt?: number;
  lock?: MessageLock;
  deadLetterSource?: string;
}

export interface MessageLock {
  token: string;
  until: number;
  /** Where the message goes back to when the lock is released without completion. */
  returnState: 'active' | 'deferred';
}

export interface StoreLimits {
  lockDurationMs: number;
  maxDeliveryCount: number;
  deadLetterOnExpiration: boolean;
  /** False for dead-letter queues: their messages neither expire nor get dead-lettered again. */
  isDeadLetterQueue: boolean;
}

export interface StoreCounters {
  enqueued: number;
  delivered: number;
  completed: number;
  abandoned: number;
  released: number;
  deferred: number;
  deadLettered: number;
  expired: number;
  lockExpired: number;
  /** Peek requests, and the messages they returned (Standard bills each peeked message a credit). */
  peeks: number;
  peeked: number;
}

export class SettleError extends Error {
  constructor(
    readonly condition: string,
    message: string,
  ) {
    super(message);
  }
}

export interface DeadLetterInfo {
  reason?: string;
  description?: string;
  properties?: Record<string, unknown>;
}

/** Called when a message leaves this store for its dead-letter destination. */
export type DeadLetterSink = (msg: StoredMessage, info: DeadLetterInfo) => void;

export class MessageStore {
  readonly messages = new Map<number, StoredMessage>();
  private readonly available = new MinHeap<number>();
  private readonly inAvailable = new Set<number>();
  private readonly scheduled = new MinHeap<number>();
  private readonly expiries = new MinHeap<number>();
  private readonly lockExpiries = new MinHeap<string>();
  private readonly locks = new Map<string, StoredMessage>();
  private ordered = true;
  private lastSeq = -Infinity;
  readonly counters: StoreCounters = {
    enqueued: 0,
    delivered: 0,
    completed: 0,
    abandoned: 0,
    released: 0,
    deferred: 0,
    deadLettered: 0,
    expired: 0,
    lockExpired: 0,
    peeks: 0,
    peeked: 0,
  };
  /** Set by the owner: called whenever a message may have become deliverable. */
  onAvailable: () => void = () => {};
  /** Set by the owner: where dead-lettered messages go. */
  deadLetterSink: DeadLetterSink = () => {};
  /**
   * Set by the owner: called with a message's sequence number after any change worth persisting
   * to it (added, removed, state, delivery count, properties, or locked: a lock lost to a restart
   * counts as a delivery attempt, as in Azure).
   */
  onChange: (seq: number) => void = () => {};

  constructor(
    readonly path: string,
    readonly limits: StoreLimits,
  ) {}

  get activeCount(): number {
    return this.inAvailable.size;
  }

  /** Adds a message; a future scheduledAt keeps it invisible until then. */
  enqueue(msg: StoredMessage, now = Date.now()): void {
    if (msg.seq < this.lastSeq) this.ordered = false;
    this.lastSeq = Math.max(this.lastSeq, msg.seq);
    this.messages.set(msg.seq, msg);
    if (msg.state === 'scheduled' && msg.scheduledAt !== undefined && msg.scheduledAt > now) {
      this.scheduled.push(msg.scheduledAt, msg.seq);
    } else {
      if (msg.state === 'scheduled') this.activateScheduled(msg, now);
      this.counters.enqueued++;
      if (msg.state === 'active') this.makeAvailable(msg);
      this.trackExpiry(msg);
    }
    this.onChange(msg.seq);
    if (this.inAvailable.size > 0) this.onAvailable();
  }

  /**
   * Puts back a message read from disk at start. One whose delivery attempts are used up (its
   * last lock was lost to the restart) is dead-lettered, as a lock expiry would have done.
   */
  restore(msg: StoredMessage, now = Date.now()): void {
    if (
      !this.limits.isDeadLetterQueue &&
      msg.state !== 'scheduled' &&
      msg.deliveryCount >= this.limits.maxDeliveryCount
    ) {
      this.moveToDeadLetter(msg, {
        reason: 'MaxDeliveryCountExceeded',
        description: `Message could not be consumed after ${this.limits.maxDeliveryCount} delivery attempts.`,
      });
      return;
    }
    this.enqueue(msg, now);
  }

  private activateScheduled(msg: StoredMessage, now: number): void {
    const ttl = msg.expiresAt - msg.enqueuedTime;
    msg.state = 'active';
    msg.enqueuedTime = Math.max(now, msg.scheduledAt ?? now);
    msg.expiresAt = msg.enqueuedTime + ttl;
  }

  private makeAvailable(msg: StoredMessage): void {
    if (this.inAvailable.has(msg.seq)) return;
    this.inAvailable.add(msg.seq);
    this.available.push(msg.seq, msg.seq);
  }

  private trackExpiry(msg: StoredMessage): void {
    if (!this.limits.isDeadLetterQueue && Number.isFinite(msg.expiresAt))
      this.expiries.push(msg.expiresAt, msg.seq);
  }

  /** True when a message could be handed out now, without taking it. */
  hasAvailable(): boolean {
    return this.inAvailable.size > 0;
  }

  /**
   * Takes the next deliverable message in sequence order. Peek-lock locks it; receive-and-delete
   * removes it. Expired messages met on the way are expired instead of delivered.
   */
  take(mode: 'peekLock' | 'receiveAndDelete', now = Date.now()): StoredMessage | undefined {
    for (;;) {
      const seq = this.available.pop();
      if (seq === undefined) return undefined;
      if (!this.inAvailable.delete(seq)) continue;
      const msg = this.messages.get(seq);
      if (!msg || msg.state !== 'active' || msg.lock) continue;
      if (!this.limits.isDeadLetterQueue && msg.expiresAt <= now) {
        this.expire(msg);
        continue;
      }
      this.counters.delivered++;
      if (mode === 'receiveAndDelete') {
        this.messages.delete(seq);
      } else {
        this.lock(msg, 'active', now);
      }
      this.onChange(seq);
      return msg;
    }
  }

  private lock(msg: StoredMessage, returnState: 'active' | 'deferred', now: number): void {
    const token = randomUUID();
    msg.lock = { token, until: now + this.limits.lockDurationMs, returnState };
    this.locks.set(token, msg);
    this.lockExpiries.push(msg.lock.until, token);
  }

  private lockedMessage(token: string, now: number): StoredMessage {
    const msg = this.locks.get(token);
    if (!msg || !msg.lock || msg.lock.until <= now) {
      throw new SettleError(
        'com.microsoft:message-lock-lost',
        `The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue. Reference: ${this.path}`,
      );
    }
    return msg;
  }

  private unlock(msg: StoredMessage): void {
    if (msg.lock) this.locks.delete(msg.lock.token);
    msg.lock = undefined;
  }

  hasLock(token: string): boolean {
    return this.locks.has(token);
  }

  complete(token: string, now = Date.now()): void {
    const msg = this.lockedMessage(token, now);
    this.unlock(msg);
    this.messages.delete(msg.seq);
    this.counters.completed++;
    this.onChange(msg.seq);
  }

  /** Releases the lock; the delivery count goes up and MaxDeliveryCount may dead-letter it. */
  abandon(token: string, properties?: Record<string, unknown>, now = Date.now()): void {
    const msg = this.lockedMessage(token, now);
    this.modifyProperties(msg, properties);
    this.counters.abandoned++;
    this.releaseFailed(msg);
  }

  /**
   * The client gives back a message it never handed to its application (AMQP `released`; the
   * .NET client does this with prefetch 0): not a failed attempt, so the count stays.
   */
  release(token: string, now = Date.now()): void {
    const msg = this.lockedMessage(token, now);
    const returnState = msg.lock?.returnState ?? 'active';
    this.unlock(msg);
    this.counters.released++;
    this.returnTo(msg, returnState);
  }

  defer(token: string, properties?: Record<string, unknown>, now = Date.now()): void {
    const msg = this.lockedMessage(token, now);
    this.modifyProperties(msg, properties);
    this.unlock(msg);
    msg.state = 'deferred';
    this.counters.deferred++;
    this.onChange(msg.seq);
  }

  deadLetter(token: string, info: DeadLetterInfo, now = Date.now()): void {
    const msg = this.lockedMessage(token, now);
    if (this.limits.isDeadLetterQueue) {
      // Service Bus refuses it; the message keeps its lock and its first reason.
      throw new SettleError(
        'amqp:not-allowed',
        `Cannot dead-letter a message that is already in a dead-letter queue (sequence number ${msg.seq}). Reference: ${this.path}`,
      );
    }
    this.unlock(msg);
    this.moveToDeadLetter(msg, info);
  }

  renew(token: string, now = Date.now()): number {
    const msg = this.lockedMessage(token, now);
    msg.lock!.until = now + this.limits.lockDurationMs;
    this.lockExpiries.push(msg.lock!.until, token);
    return msg.lock!.until;
  }

  private modifyProperties(msg: StoredMessage, properties?: Record<string, unknown>): void {
    if (properties && Object.keys(properties).length > 0) {
      msg.amqp.application_properties = { ...(msg.amqp.application_properties ?? {}), ...properties };
    }
  }

  /**
   * The delivery count a locked message has once its lock is released without success. Service
   * Bus counts deliveries when it locks: an active message's failed attempt is counted here, a
   * deferred one was counted when it was received by sequence number, and the dead-letter queue
   * counts nothing.
   */
  countAfterFailedAttempt(msg: StoredMessage): number {
    if (this.limits.isDeadLetterQueue || msg.lock?.returnState === 'deferred') return msg.deliveryCount;
    return msg.deliveryCount + 1;
  }

  /** A failed attempt (abandon or lock expiry): count it, then dead-letter or return the message. */
  private releaseFailed(msg: StoredMessage): void {
    const returnState = msg.lock?.returnState ?? 'active';
    msg.deliveryCount = this.countAfterFailedAttempt(msg);
    this.unlock(msg);
    // For a deferred message the attempt just released is already in its count.
    const attempts = returnState === 'deferred' ? msg.deliveryCount + 1 : msg.deliveryCount;
    if (!this.limits.isDeadLetterQueue && attempts >= this.limits.maxDeliveryCount) {
      this.moveToDeadLetter(msg, {
        reason: 'MaxDeliveryCountExceeded',
        description: `Message could not be consumed after ${this.limits.maxDeliveryCount} delivery attempts.`,
      });
      return;
    }
    this.returnTo(msg, returnState);
  }

  private returnTo(msg: StoredMessage, returnState: 'active' | 'deferred'): void {
    msg.state = returnState;
    if (returnState === 'active') {
      if (!this.limits.isDeadLetterQueue && msg.expiresAt <= Date.now()) {
        this.expire(msg);
        return;
      }
      this.makeAvailable(msg);
      this.onChange(msg.seq);
      this.onAvailable();
    } else {
      this.onChange(msg.seq);
    }
  }

  private moveToDeadLetter(msg: StoredMessage, info: DeadLetterInfo): void {
    this.messages.delete(msg.seq);
    this.inAvailable.delete(msg.seq);
    this.counters.deadLettered++;
    const props: Record<string, unknown> = {
      ...(msg.amqp.application_properties ?? {}),
      ...(info.properties ?? {}),
    };
    if (info.reason !== undefined) props.DeadLetterReason = info.reason;
    if (info.description !== undefined) props.DeadLetterErrorDescription = info.description;
    msg.amqp.application_properties = props;
    msg.state = 'active';
    this.onChange(msg.seq);
    this.deadLetterSink(msg, info);
  }

  private expire(msg: StoredMessage): void {
    this.counters.expired++;
    if (this.limits.deadLetterOnExpiration) {
      this.moveToDeadLetter(msg, {
        reason: 'TTLExpiredException',
        description: 'The message expired and was dead lettered.',
      });
    } else {
      this.messages.delete(msg.seq);
      this.inAvailable.delete(msg.seq);
      this.onChange(msg.seq);
    }
  }

  /** Runs due work: scheduled messages appear, expired messages go, expired locks release. */
  tick(now = Date.now()): void {
    let becameAvailable = false;
    while ((this.scheduled.peekKey() ?? Infinity) <= now) {
      const seq = this.scheduled.pop()!;
      const msg = this.messages.get(seq);
      if (!msg || msg.state !== 'scheduled') continue;
      this.activateScheduled(msg, now);
      this.counters.enqueued++;
      this.makeAvailable(msg);
      this.trackExpiry(msg);
      becameAvailable = true;
      this.onChange(seq);
    }
    while ((this.lockExpiries.peekKey() ?? Infinity) <= now) {
      const token = this.lockExpiries.pop()!;
      const msg = this.locks.get(token);
      if (!msg || !msg.lock || msg.lock.until > now) continue;
      this.counters.lockExpired++;
      this.releaseFailed(msg);
    }
    while ((this.expiries.peekKey() ?? Infinity) <= now) {
      const seq = this.expiries.pop()!;
      const msg = this.messages.get(seq);
      // A locked message expires when its lock is released, as in Azure.
      if (!msg || msg.lock || msg.state === 'scheduled' || msg.expiresAt > now) continue;
      this.expire(msg);
    }
    if (becameAvailable) this.onAvailable();
  }

  /** Cancels scheduled messages; unknown sequence numbers are ignored, as Azure does. */
  cancelScheduled(seqs: number[]): void {
    for (const seq of seqs) {
      const msg = this.messages.get(seq);
      if (msg && msg.state === 'scheduled') {
        this.messages.delete(seq);
        this.onChange(seq);
      }
    }
  }

  /** Receives deferred messages by sequence number; any that is not deferred fails the whole call. */
  receiveDeferred(seqs: number[], mode: 'peekLock' | 'receiveAndDelete', now = Date.now()): StoredMessage[] {
    const found = seqs.map((seq) => {
      const msg = this.messages.get(seq);
      if (!msg || msg.state !== 'deferred' || msg.lock) {
        throw new SettleError(
          'com.microsoft:message-not-found',
          `Failed to lock one or more specified messages. Either the message is not deferred or it does not exist (sequence number ${seq}). Reference: ${this.path}`,
        );
      }
      return msg;
    });
    for (const msg of found) {
      this.counters.delivered++;
      // Receiving a deferred message is a delivery and Service Bus counts it (take() counts on
      // failure instead); the dead-letter queue counts nothing.
      if (!this.limits.isDeadLetterQueue) msg.deliveryCount++;
      if (mode === 'receiveAndDelete') this.messages.delete(msg.seq);
      else this.lock(msg, 'deferred', now);
      this.onChange(msg.seq);
    }
    return found;
  }

  /** Messages from a sequence number on, in order: active (locked or not), deferred and scheduled. */
  peek(fromSeq: number, count: number): StoredMessage[] {
    const out = this.peekFrom(fromSeq, count);
    this.counters.peeks++;
    this.counters.peeked += out.length;
    return out;
  }

  private peekFrom(fromSeq: number, count: number): StoredMessage[] {
    const out: StoredMessage[] = [];
    if (this.ordered) {
      for (const msg of this.messages.values()) {
        if (msg.seq < fromSeq) continue;
        out.push(msg);
        if (out.length >= count) break;
      }
      return out;
    }
    for (const msg of this.messages.values()) if (msg.seq >= fromSeq) out.push(msg);
    out.sort((a, b) => a.seq - b.seq);
    return out.slice(0, count);
  }

  /** Drops every timer-like structure; used when the emulator stops. */
  clear(): void {
    this.messages.clear();
    this.available.clear();
    this.inAvailable.clear();
    this.scheduled.clear();
    this.expiries.clear();
    this.lockExpiries.clear();
    this.locks.clear();
  }
}
