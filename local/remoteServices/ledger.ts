import type {
  RemoteAction,
  RemoteCompensation,
  RemoteOperation,
  RemoteServiceName,
} from '../../shared/agents/remoteOperations.js';

/**
 * A demo service's record of every side effect, keyed by idempotency key. It is what lets tests
 * prove "no double charge" and "compensation once per completed step": `effects` is append-only,
 * so a second effect for one key (or one order) would show up as a second entry.
 */

export type JsonObject = Record<string, unknown>;

export interface EffectRecord {
  idempotencyKey: string;
  operation: RemoteAction;
  orderId: string;
  response: JsonObject;
  performedAt: string;
  /** Repeats with the same key answered from this record, without a second effect. */
  duplicatesAbsorbed: number;
}

export interface CompensationRecord {
  /** The key of the action this compensation undoes. */
  originalIdempotencyKey: string;
  /** The compensation request's own Idempotency-Key (the first one seen). */
  idempotencyKey: string;
  operation: RemoteCompensation;
  orderId: string;
  /** True when the action had never happened: nothing was undone, and the key is now barred. */
  tombstone: boolean;
  response: JsonObject;
  compensatedAt: string;
  duplicatesAbsorbed: number;
}

export interface RefusalRecord {
  idempotencyKey: string;
  operation: RemoteOperation;
  orderId: string;
  reason: 'tombstoned' | 'key-conflict';
  detail: string;
  at: string;
}

export interface RequestLogEntry {
  seq: number;
  receivedAt: string;
  operation: string;
  idempotencyKey: string | null;
  /** 1-based attempt number for this (operation, key). */
  attempt: number;
  /** HTTP status sent, or null when no response was sent (hang, lost reply, client gone). */
  status: number | null;
  outcome: string;
  /** When the service answered (or gave up on) the request: with receivedAt, its time in flight. */
  answeredAt?: string;
}

export interface LedgerSnapshot {
  service: RemoteServiceName;
  effects: EffectRecord[];
  compensations: CompensationRecord[];
  refusals: RefusalRecord[];
  requests: RequestLogEntry[];
  counts: {
    requests: number;
    effects: number;
    duplicatesAbsorbed: number;
    compensations: number;
    compensationDuplicatesAbsorbed: number;
    tombstones: number;
    refusedAfterTombstone: number;
    keyConflicts: number;
    faultsInjected: Record<string, number>;
  };
}

export type ActionOutcome =
  | { kind: 'performed'; response: JsonObject }
  | { kind: 'repeat'; response: JsonObject }
  | { kind: 'refused'; reason: RefusalRecord['reason']; detail: string };

export type CompensationOutcome =
  | { kind: 'compensated'; response: JsonObject }
  | { kind: 'tombstoned'; response: JsonObject }
  | { kind: 'repeat'; response: JsonObject }
  | { kind: 'refused'; reason: 'key-conflict'; detail: string };

const requestLogLimit = 5000;

export class SideEffectLedger {
  private effects: EffectRecord[] = [];
  private effectsByKey = new Map<string, EffectRecord>();
  private compensationsByOriginalKey = new Map<string, CompensationRecord>();
  private refusals: RefusalRecord[] = [];
  private requests: RequestLogEntry[] = [];
  private requestCount = 0;
  private attemptsByKey = new Map<string, number>();
  private faultsInjected: Record<string, number> = {};

  constructor(
    readonly service: RemoteServiceName,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Counts an arriving attempt for (operation, key) and returns its 1-based number. */
  nextAttempt(operation: string, idempotencyKey: string): number {
    const id = `${operation}\n${idempotencyKey}`;
    const attempt = (this.attemptsByKey.get(id) ?? 0) + 1;
    this.attemptsByKey.set(id, attempt);
    return attempt;
  }

  logRequest(entry: Omit<RequestLogEntry, 'seq' | 'receivedAt' | 'status' | 'outcome'>): RequestLogEntry {
    const logged: RequestLogEntry = {
      ...entry,
      seq: ++this.requestCount,
      receivedAt: this.now().toISOString(),
      status: null,
      outcome: 'pending',
    };
    this.requests.push(logged);
    if (this.requests.length > requestLogLimit) this.requests.shift();
    return logged;
  }

  countFault(kind: string): void {
    this.faultsInjected[kind] = (this.faultsInjected[kind] ?? 0) + 1;
  }

  /**
   * Performs an action once per key. `effect` runs only for the first request with the key, and
   * synchronously with the check, so two concurrent requests cannot both perform it.
   */
  performAction(
    operation: RemoteAction,
    idempotencyKey: string,
    orderId: string,
    effect: () => JsonObject,
  ): ActionOutcome {
    const tombstone = this.compensationsByOriginalKey.get(idempotencyKey);
    if (tombstone?.tombstone) {
      return this.refuse(
        idempotencyKey,
        operation,
        orderId,
        'tombstoned',
        `the ${tombstone.operation} for this key arrived first; a late ${operation} is refused`,
      );
    }
    const existing = this.effectsByKey.get(idempotencyKey);
    if (existing) {
      const conflict = this.conflict(existing, operation, orderId);
      if (conflict) return this.refuse(idempotencyKey, operation, orderId, 'key-conflict', conflict);
      existing.duplicatesAbsorbed++;
      return { kind: 'repeat', response: existing.response };
    }
    const record: EffectRecord = {
      idempotencyKey,
      operation,
      orderId,
      response: effect(),
      performedAt: this.now().toISOString(),
      duplicatesAbsorbed: 0,
    };
    this.effects.push(record);
    this.effectsByKey.set(idempotencyKey, record);
    return { kind: 'performed', response: record.response };
  }

  /**
   * Undoes the action recorded under `originalIdempotencyKey` at most once. Compensating an action
   * that never happened leaves a tombstone, so the action arriving late cannot take effect.
   */
  compensate(
    operation: RemoteCompensation,
    compensatedAction: RemoteAction,
    idempotencyKey: string,
    originalIdempotencyKey: string,
    orderId: string,
    undo: (effect: EffectRecord | undefined) => JsonObject,
  ): CompensationOutcome {
    const existing = this.compensationsByOriginalKey.get(originalIdempotencyKey);
    if (existing) {
      const conflict = this.conflict(existing, operation, orderId);
      if (conflict) {
        return this.refuse(
          idempotencyKey,
          operation,
          orderId,
          'key-conflict',
          conflict,
        ) as CompensationOutcome;
      }
      existing.duplicatesAbsorbed++;
      return { kind: 'repeat', response: existing.response };
    }
    const effect = this.effectsByKey.get(originalIdempotencyKey);
    if (effect) {
      const conflict = this.conflict(effect, compensatedAction, orderId);
      if (conflict) {
        return this.refuse(
          idempotencyKey,
          operation,
          orderId,
          'key-conflict',
          conflict,
        ) as CompensationOutcome;
      }
    }
    const record: CompensationRecord = {
      originalIdempotencyKey,
      idempotencyKey,
      operation,
      orderId,
      tombstone: effect === undefined,
      response: undo(effect),
      compensatedAt: this.now().toISOString(),
      duplicatesAbsorbed: 0,
    };
    this.compensationsByOriginalKey.set(originalIdempotencyKey, record);
    return { kind: record.tombstone ? 'tombstoned' : 'compensated', response: record.response };
  }

  snapshot(): LedgerSnapshot {
    const compensations = [...this.compensationsByOriginalKey.values()];
    const copy = <T>(value: T): T => structuredClone(value);
    return {
      service: this.service,
      effects: copy(this.effects),
      compensations: copy(compensations),
      refusals: copy(this.refusals),
      requests: copy(this.requests),
      counts: {
        requests: this.requestCount,
        effects: this.effects.length,
        duplicatesAbsorbed: sum(this.effects.map((e) => e.duplicatesAbsorbed)),
        compensations: compensations.filter((c) => !c.tombstone).length,
        compensationDuplicatesAbsorbed: sum(compensations.map((c) => c.duplicatesAbsorbed)),
        tombstones: compensations.filter((c) => c.tombstone).length,
        refusedAfterTombstone: this.refusals.filter((r) => r.reason === 'tombstoned').length,
        keyConflicts: this.refusals.filter((r) => r.reason === 'key-conflict').length,
        faultsInjected: { ...this.faultsInjected },
      },
    };
  }

  reset(): void {
    this.effects = [];
    this.effectsByKey.clear();
    this.compensationsByOriginalKey.clear();
    this.refusals = [];
    this.requests = [];
    this.requestCount = 0;
    this.attemptsByKey.clear();
    this.faultsInjected = {};
  }

  private conflict(
    record: { operation: RemoteOperation; orderId: string },
    operation: RemoteOperation,
    orderId: string,
  ): string | undefined {
    if (record.operation !== operation) return `the key was already used for ${record.operation}`;
    if (record.orderId !== orderId) return `the key was already used for order ${record.orderId}`;
    return undefined;
  }

  private refuse(
    idempotencyKey: string,
    operation: RemoteOperation,
    orderId: string,
    reason: RefusalRecord['reason'],
    detail: string,
  ): ActionOutcome {
    this.refusals.push({ idempotencyKey, operation, orderId, reason, detail, at: this.now().toISOString() });
    return { kind: 'refused', reason, detail };
  }
}

function sum(values: number[]): number {
  return values.reduce((a, b) => a + b, 0);
}
