/**
 * Message persistence (`dataDir` / `--data`): one append-only log of state records in
 * `<dataDir>/servicebus.log`, replayed at start and rewritten as a snapshot (compacted) at start
 * and whenever it has grown well past the live state.
 *
 * Records describe state, not operations: "message <seq> of store <path> now looks like this",
 * "message <seq> is gone from store <path>", "target <path> hands out <n> next", "target <path>
 * saw message id <id> at <t>". Replay keeps the last record per key, so a record written twice
 * is harmless and compaction is just "write every live record".
 *
 * Changes are collected as dirty keys and written by one loop in group commits: append, then
 * fdatasync, then the waiters of that round run (the server acknowledges sends and settlements
 * there). A frame is `u32 length | u32 crc32 | JSON`; a torn or corrupt frame ends the replay.
 */
import { crc32 } from 'node:zlib';
import { mkdir, open, readFile, rename, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { message as rheaMessage, type Message } from 'rhea';
import type { MessageState, MessageStore, StoredMessage } from './message-store.js';
import type { Namespace, SendTarget } from './namespace.js';
import { decodeMessage, noBody } from './wire.js';

export const LOG_FILE = 'servicebus.log';
const FORMAT_VERSION = 1;
/** Compaction runs once this many records were appended and they outnumber twice the live ones. */
export const DEFAULT_COMPACT_AFTER_RECORDS = 10_000;
const FRAME_HEADER = 8;

export type LogRecord =
  | { k: 'h'; v: number }
  | {
      k: 'm';
      s: string;
      q: number;
      /** The AMQP message as rhea encodes it, base64: keeps every AMQP type as sent. */
      a: string;
      e: number;
      x: number | null;
      d: number;
      st: MessageState;
      sa?: number;
      dl?: string;
    }
  | { k: 'x'; s: string; q: number }
  | { k: 'n'; t: string; n: number }
  | { k: 'i'; t: string; id: string; at: number };

export function encodeFrame(record: LogRecord): Buffer {
  const payload = Buffer.from(JSON.stringify(record), 'utf8');
  const frame = Buffer.allocUnsafe(FRAME_HEADER + payload.length);
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt32LE(crc32(payload), 4);
  payload.copy(frame, FRAME_HEADER);
  return frame;
}

/** Reads frames up to the first torn or corrupt one; `validBytes` is where that one starts. */
export function decodeFrames(buf: Buffer): { records: LogRecord[]; validBytes: number } {
  const records: LogRecord[] = [];
  let offset = 0;
  while (offset < buf.length) {
    if (buf.length - offset < FRAME_HEADER) break;
    const length = buf.readUInt32LE(offset);
    const end = offset + FRAME_HEADER + length;
    if (end > buf.length) break;
    const payload = buf.subarray(offset + FRAME_HEADER, end);
    if (crc32(payload) !== buf.readUInt32LE(offset + 4)) break;
    let record: LogRecord;
    try {
      record = JSON.parse(payload.toString('utf8')) as LogRecord;
    } catch {
      break;
    }
    records.push(record);
    offset = end;
  }
  return { records, validBytes: offset };
}

const encodedAmqp = new WeakMap<Message, { props: unknown; base64: string }>();

/** rhea's encoding of the message; cached until its application properties are replaced. */
function encodeAmqp(amqp: Message): string {
  const cached = encodedAmqp.get(amqp);
  if (cached && cached.props === amqp.application_properties) return cached.base64;
  const whole = amqp.body === undefined ? { ...amqp, body: noBody } : amqp;
  const base64 = (rheaMessage.encode(whole as Message) as Buffer).toString('base64');
  encodedAmqp.set(amqp, { props: amqp.application_properties, base64 });
  return base64;
}

/**
 * A locked message is written as it will be after a restart: its lock gone, the delivery
 * counted as a failed attempt (Azure counts a delivery whose lock is lost), back in the state it
 * was taken from.
 */
function messageRecord(store: MessageStore, msg: StoredMessage): LogRecord {
  return {
    k: 'm',
    s: store.path,
    q: msg.seq,
    a: encodeAmqp(msg.amqp),
    e: msg.enqueuedTime,
    x: Number.isFinite(msg.expiresAt) ? msg.expiresAt : null,
    d: msg.lock ? store.countAfterFailedAttempt(msg) : msg.deliveryCount,
    st: msg.lock ? msg.lock.returnState : msg.state,
    sa: msg.scheduledAt,
    dl: msg.deadLetterSource,
  };
}

function storedFrom(record: Extract<LogRecord, { k: 'm' }>): StoredMessage {
  return {
    seq: record.q,
    amqp: decodeMessage(Buffer.from(record.a, 'base64')),
    enqueuedTime: record.e,
    expiresAt: record.x ?? Infinity,
    deliveryCount: record.d,
    state: record.st,
    scheduledAt: record.sa,
    deadLetterSource: record.dl,
  };
}

function storesOf(ns: Namespace): Map<string, MessageStore> {
  const stores = new Map<string, MessageStore>();
  for (const e of ns.allReceivables()) {
    stores.set(e.active.path.toLowerCase(), e.active);
    stores.set(e.deadLetter.path.toLowerCase(), e.deadLetter);
  }
  return stores;
}

function targetStores(target: SendTarget): MessageStore[] {
  const entities = target.queue ? [target.queue] : (target.subscriptions ?? []).map((s) => s.entity);
  return entities.flatMap((e) => [e.active, e.deadLetter]);
}

/** Applies replayed records to a fresh namespace. Returns how many messages came back. */
function restore(ns: Namespace, records: LogRecord[], log: (line: string) => void, now: number): number {
  const stores = storesOf(ns);
  const targets = new Map(ns.allTargets().map((t) => [t.path.toLowerCase(), t]));
  const messages = new Map<MessageStore, Map<number, Extract<LogRecord, { k: 'm' }>>>();
  const seen = new Map<SendTarget, Map<string, number>>();
  const unknown = new Set<string>();
  for (const r of records) {
    switch (r.k) {
      case 'h':
        if (r.v !== FORMAT_VERSION)
          throw new Error(`${LOG_FILE} has format version ${r.v}; this emulator reads ${FORMAT_VERSION}`);
        break;
      case 'm':
      case 'x': {
        const store = stores.get(r.s.toLowerCase());
        if (!store) {
          unknown.add(r.s);
          break;
        }
        let byStore = messages.get(store);
        if (!byStore) messages.set(store, (byStore = new Map()));
        if (r.k === 'm') byStore.set(r.q, r);
        else byStore.delete(r.q);
        break;
      }
      case 'n':
      case 'i': {
        const target = targets.get(r.t.toLowerCase());
        if (!target) {
          unknown.add(r.t);
          break;
        }
        if (r.k === 'n') {
          target.nextSeq = Math.max(target.nextSeq, r.n);
        } else {
          let ids = seen.get(target);
          if (!ids) seen.set(target, (ids = new Map()));
          // Re-inserting keeps the map in arrival order, which pruning relies on.
          ids.delete(r.id);
          ids.set(r.id, r.at);
        }
        break;
      }
    }
  }
  if (unknown.size > 0)
    log(`persistence: dropped data of entities no longer in the config: ${[...unknown].join(', ')}`);
  for (const [target, ids] of seen) {
    const horizon = now - target.duplicateDetection.windowMs;
    for (const [id, at] of ids) if (at > horizon) target.seenIds.set(id, at);
  }
  let count = 0;
  for (const [store, byStore] of messages) {
    for (const seq of [...byStore.keys()].sort((a, b) => a - b)) {
      store.restore(storedFrom(byStore.get(seq)!), now);
      count++;
    }
  }
  // Sequence numbers never go back, even if the counter record was lost with a torn tail.
  for (const target of ns.allTargets()) {
    for (const store of targetStores(target))
      for (const seq of store.messages.keys()) target.nextSeq = Math.max(target.nextSeq, seq + 1);
  }
  return count;
}

class Persistence {
  private fh?: FileHandle;
  private readonly dirtyMessages = new Map<MessageStore, Set<number>>();
  private readonly dirtyTargets = new Set<SendTarget>();
  private newIds: Array<{ target: SendTarget; id: string }> = [];
  private waiters: Array<(err?: Error) => void> = [];
  private running?: Promise<void>;
  private appended = 0;
  private liveAtCompaction = 0;
  private mustCompact = false;
  private closed = false;

  constructor(
    private readonly ns: Namespace,
    private readonly dir: string,
    private readonly log: (line: string) => void,
    private readonly compactAfterRecords: number,
  ) {}

  private get file(): string {
    return join(this.dir, LOG_FILE);
  }

  hook(): void {
    this.ns.onMessageChange = (store, seq) => {
      let set = this.dirtyMessages.get(store);
      if (!set) this.dirtyMessages.set(store, (set = new Set()));
      set.add(seq);
      this.kick();
    };
    this.ns.onTargetChange = (target, id) => {
      this.dirtyTargets.add(target);
      if (id !== undefined) this.newIds.push({ target, id });
      this.kick();
    };
    this.ns.afterDurable = (done) => {
      if (this.closed) {
        done(new Error('the emulator is stopping'));
        return;
      }
      this.waiters.push(done);
      this.kick();
    };
  }

  private kick(): void {
    if (!this.running && !this.closed) this.running = this.loop();
  }

  private hasWork(): boolean {
    return (
      this.waiters.length > 0 ||
      this.dirtyMessages.size > 0 ||
      this.dirtyTargets.size > 0 ||
      this.newIds.length > 0
    );
  }

  /** One writer: each round takes everything dirty so far, so concurrent changes share an fsync. */
  private async loop(): Promise<void> {
    // Let the current I/O turn finish, so frames that arrived together are committed together.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.hasWork()) await this.round();
    this.running = undefined;
  }

  private async round(): Promise<void> {
    const waiters = this.waiters;
    this.waiters = [];
    let failure: Error | undefined;
    try {
      if (this.mustCompact || this.appended > Math.max(this.compactAfterRecords, 2 * this.liveAtCompaction)) {
        await this.compact();
      } else {
        const frames = this.collect();
        if (frames.length > 0) {
          await this.fh!.write(Buffer.concat(frames));
          await this.fh!.datasync();
          this.appended += frames.length;
        }
      }
    } catch (err) {
      failure = err as Error;
      // The file may now end in a partial frame: rewrite it whole next time.
      this.mustCompact = true;
      this.log(`persistence: write failed (${failure.message}); the affected operations were refused`);
    }
    for (const done of waiters) {
      try {
        done(failure);
      } catch (err) {
        this.log(`persistence: acknowledgement failed: ${(err as Error).message}`);
      }
    }
  }

  private collect(): Buffer[] {
    const frames: Buffer[] = [];
    for (const target of this.dirtyTargets)
      frames.push(encodeFrame({ k: 'n', t: target.path, n: target.nextSeq }));
    for (const { target, id } of this.newIds) {
      const at = target.seenIds.get(id);
      if (at !== undefined) frames.push(encodeFrame({ k: 'i', t: target.path, id, at }));
    }
    for (const [store, seqs] of this.dirtyMessages) {
      for (const seq of seqs) {
        const msg = store.messages.get(seq);
        frames.push(encodeFrame(msg ? messageRecord(store, msg) : { k: 'x', s: store.path, q: seq }));
      }
    }
    this.clearDirty();
    return frames;
  }

  private clearDirty(): void {
    this.dirtyMessages.clear();
    this.dirtyTargets.clear();
    this.newIds = [];
  }

  /** Every live record, in a new file that atomically replaces the log. */
  private snapshot(now: number): Buffer[] {
    this.clearDirty();
    const frames: Buffer[] = [encodeFrame({ k: 'h', v: FORMAT_VERSION })];
    for (const target of this.ns.allTargets()) {
      frames.push(encodeFrame({ k: 'n', t: target.path, n: target.nextSeq }));
      const horizon = now - target.duplicateDetection.windowMs;
      for (const [id, at] of target.seenIds)
        if (at > horizon) frames.push(encodeFrame({ k: 'i', t: target.path, id, at }));
    }
    for (const e of this.ns.allReceivables()) {
      for (const store of [e.active, e.deadLetter])
        for (const msg of store.messages.values()) frames.push(encodeFrame(messageRecord(store, msg)));
    }
    return frames;
  }

  async compact(): Promise<void> {
    const frames = this.snapshot(Date.now());
    const tmp = `${this.file}.tmp`;
    const out = await open(tmp, 'w');
    try {
      await out.write(Buffer.concat(frames));
      await out.sync();
    } finally {
      await out.close();
    }
    await this.fh?.close();
    this.fh = undefined;
    await rename(tmp, this.file);
    await syncDir(this.dir);
    this.fh = await open(this.file, 'a');
    this.appended = 0;
    this.liveAtCompaction = frames.length;
    this.mustCompact = false;
  }

  async close(): Promise<void> {
    await this.running;
    if (this.hasWork()) await this.round();
    this.closed = true;
    await this.running;
    await this.fh?.close();
    this.fh = undefined;
  }
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Loads `<dir>/servicebus.log` into the namespace (tolerating a torn tail), rewrites it as a
 * snapshot, and from then on records every change before the server acknowledges it.
 */
export async function attachPersistence(
  ns: Namespace,
  dir: string,
  log: (line: string) => void,
  compactAfterRecords = DEFAULT_COMPACT_AFTER_RECORDS,
): Promise<{ close(): Promise<void> }> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, LOG_FILE);
  // A leftover from a compaction cut short: the log it was replacing is still whole.
  await rm(`${file}.tmp`, { force: true });
  let buf: Buffer;
  try {
    buf = await readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    buf = Buffer.alloc(0);
  }
  const { records, validBytes } = decodeFrames(buf);
  if (validBytes < buf.length) {
    log(
      `persistence: ignored a torn or corrupt tail of ${buf.length - validBytes} bytes at offset ${validBytes} of ${file} (a write cut short by a crash); the records before it are kept`,
    );
  }
  const count = restore(ns, records, log, Date.now());
  const persistence = new Persistence(ns, dir, log, compactAfterRecords);
  await persistence.compact();
  persistence.hook();
  log(`persistence: ${count} messages restored from ${file}`);
  return { close: () => persistence.close() };
}
