/**
 * Conversions between stored messages and what goes on the wire, in the shapes the
 * @azure/service-bus SDK reads: broker annotations, lock tokens as delivery tags, longs.
 */
import { message as rheaMessage, types as rheaTypes, type Message } from 'rhea';
import { isTyped, keepWireTypes } from './wireTypes.js';
import type { MessageStore, StoredMessage } from './message-store.js';

const types = rheaTypes as unknown as {
  wrap_long(v: number | Buffer): unknown;
  wrap_int(v: number): unknown;
  wrap_symbol(v: string): unknown;
  wrap_uuid(v: Buffer): unknown;
  wrap_array(v: unknown[], code: number, descriptor?: unknown): unknown;
};

export function uuidToBytes(uuid: string): Buffer {
  return Buffer.from(uuid.replace(/-/g, ''), 'hex');
}

export function bytesToUuid(bytes: Buffer): string {
  const h = bytes.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * The SDK turns a link delivery tag into a lock token string after swapping the bytes of the
 * first three GUID groups (.NET byte order); the tag is the swapped form so the string the SDK
 * shows, and later sends back to $management, is our token.
 */
export function lockTokenToDeliveryTag(token: string): Buffer {
  const b = uuidToBytes(token);
  return Buffer.from([b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6], ...b.subarray(8)]);
}

/** Reads a lock token sent to $management (uuid type, decoded by rhea as 16 bytes). */
export function lockTokenFromWire(value: unknown): string {
  if (Buffer.isBuffer(value) && value.length === 16) return bytesToUuid(value);
  if (typeof value === 'string') return value.toLowerCase();
  throw new Error('lock token must be a uuid');
}

/** Reads a long that rhea decoded as a number, or as 8 bytes when it is large. */
export function longFromWire(value: unknown): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  if (Buffer.isBuffer(value) && value.length === 8) return Number(value.readBigInt64BE(0));
  throw new Error(`expected a long, got ${typeof value}`);
}

export function wrapLong(n: number): unknown {
  return types.wrap_long(n);
}

/**
 * An AMQP int. Status codes of CBS and management replies must be ints: the .NET client casts
 * them to int32, and rhea would encode a positive number as a uint.
 */
export function wrapInt(n: number): unknown {
  return types.wrap_int(n);
}

/** An AMQP symbol: the .NET client reads a management reply's error condition as one. */
export function wrapSymbol(s: string): unknown {
  return types.wrap_symbol(s);
}

/** An AMQP array of longs (the .NET client reads `sequence-numbers` as long[]). */
export function wrapLongArray(values: number[]): unknown {
  return types.wrap_array(values, 0x81);
}

/** An AMQP array of timestamps (the .NET client reads renew-lock `expirations` as DateTime[]). */
export function wrapTimestampArray(values: number[]): unknown {
  return types.wrap_array(values, 0x83);
}

export function wrapUuid(token: string): unknown {
  return types.wrap_uuid(uuidToBytes(token));
}

/** Standard tier's largest message, advertised on every link and enforced on sends and schedules. */
export const MAX_MESSAGE_SIZE = 256 * 1024;

const messageStateCode = { active: 0, deferred: 1, scheduled: 2 } as const;

/**
 * A body that writes no section: Service Bus sends none for a message sent without a body or
 * peeked with omit-message-body, where rhea would write an amqp-value null (read back as null).
 */
export const noBody = { collect_sections(): void {} };

/** Builds the message a receiver sees: the sent message plus header count and broker annotations. */
export function toDeliveryMessage(msg: StoredMessage, store: MessageStore, omitBody = false): Message {
  const out: Message = { ...msg.amqp } as Message;
  out.delivery_count = msg.deliveryCount;
  if (omitBody || out.body === undefined) out.body = noBody;
  const annotations: Record<string, unknown> = { ...(msg.amqp.message_annotations ?? {}) };
  annotations['x-opt-sequence-number'] = wrapLong(msg.seq);
  annotations['x-opt-enqueued-time'] = new Date(msg.enqueuedTime);
  if (msg.lock) annotations['x-opt-locked-until'] = new Date(msg.lock.until);
  // Service Bus keeps reporting a message that was scheduled as scheduled once it is due.
  const state = msg.state === 'active' && msg.scheduledAt !== undefined ? 'scheduled' : msg.state;
  annotations['x-opt-message-state'] = types.wrap_int(messageStateCode[state]);
  if (msg.deadLetterSource && store.limits.isDeadLetterQueue) {
    annotations['x-opt-deadletter-source'] = msg.deadLetterSource;
  }
  if (msg.state === 'scheduled' && msg.scheduledAt !== undefined) {
    annotations['x-opt-scheduled-enqueue-time'] = new Date(msg.scheduledAt);
  }
  out.message_annotations = annotations;
  return out;
}

export function encodeMessage(m: Message): Buffer {
  return rheaMessage.encode(m);
}

export function decodeMessage(b: Buffer): Message {
  return keepWireTypes(rheaMessage.decode(b) as unknown as Message);
}

/** Splits a batch transfer (message format 0x80013700): each data section is one encoded message. */
export function splitBatch(raw: Buffer): Message[] {
  const outer = rheaMessage.decode(raw);
  const body = outer.body as { typecode?: number; content?: unknown; multiple?: boolean } | undefined;
  if (!body || body.typecode !== 0x75) throw new Error('a batch must carry data sections');
  const parts = body.multiple ? (body.content as Buffer[]) : [body.content as Buffer];
  return parts.map((p) => decodeMessage(p));
}

/** Bytes a value adds to an encoded message at most, or Infinity when only encoding can tell. */
function valueBound(v: unknown): number {
  if (v === undefined || v === null || typeof v === 'boolean') return 2;
  if (typeof v === 'number' || typeof v === 'bigint' || v instanceof Date) return 9;
  // A UTF-16 code unit takes at most 3 bytes in UTF-8.
  if (typeof v === 'string') return v.length * 3 + 5;
  if (Buffer.isBuffer(v)) return v.length + 5;
  // A property kept with its AMQP type (wireTypes.ts): a scalar of at most 16 bytes.
  if (isTyped(v) && (typeof v.value === 'number' || (Buffer.isBuffer(v.value) && v.value.length <= 16))) {
    return 24;
  }
  return Infinity;
}

function mapBound(map: Record<string, unknown> | undefined): number {
  let n = 8;
  for (const [k, v] of Object.entries(map ?? {})) n += valueBound(k) + valueBound(v);
  return n;
}

function bodyBound(body: unknown): number {
  const section = body as { typecode?: number; content?: unknown; multiple?: boolean } | undefined;
  if (section && typeof section === 'object' && section.typecode !== undefined) {
    const parts = section.multiple ? (section.content as unknown[]) : [section.content];
    return parts.reduce<number>((n, p) => n + valueBound(p) + 8, 0);
  }
  return valueBound(body) + 8;
}

/**
 * The encoded size of a message, computed cheaply when its parts bound it below `limit` and by
 * encoding it only otherwise (the size check runs on every send).
 */
export function encodedSizeOver(m: Message, limit: number): number | undefined {
  let bound = 256 + bodyBound(m.body);
  for (const key of [
    'message_id',
    'user_id',
    'to',
    'subject',
    'reply_to',
    'correlation_id',
    'content_type',
    'content_encoding',
    'absolute_expiry_time',
    'creation_time',
    'group_id',
    'group_sequence',
    'reply_to_group_id',
  ] as const) {
    bound += valueBound((m as unknown as Record<string, unknown>)[key]);
  }
  bound += mapBound(m.application_properties) + mapBound(m.message_annotations);
  bound += mapBound(m.delivery_annotations) + mapBound(m.footer);
  if (bound <= limit) return undefined;
  const size = (rheaMessage.encode(m) as Buffer).length;
  return size > limit ? size : undefined;
}
