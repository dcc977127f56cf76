/**
 * Application properties keep the AMQP type they were sent with. rhea decodes a map section to
 * JavaScript values and, re-encoding, picks a type from the value (a positive int becomes a uint,
 * a long a ulong, a float a double, a uuid binary), so a .NET reader's `(int)props["n"]` would
 * throw. The broker keeps each property's typed value and sends it back as it came; readers
 * inside the broker (SQL and correlation filters) see plain values through `plainValue`.
 */
import { types as rheaTypes, type Message } from 'rhea';

interface Typed {
  type: { name: string; typecode: number };
  value: unknown;
  descriptor?: unknown;
  toRheaTyped(): Typed;
}

const types = rheaTypes as unknown as {
  unwrap_map_simple(o: { value: unknown[] }): Record<string, unknown>;
  unwrap(o: unknown, leaveDescribed?: boolean): unknown;
};

/** The encoded map a decoded map section came from, kept beside the plain object. */
const sectionOf = Symbol('servicebus-emulator: typed map section');

// rhea offers no hook for a typed decode; the plain result is unchanged for every other reader
// of rhea in this process (the symbol is not enumerable, so spreads and JSON ignore it).
const plainUnwrap = types.unwrap_map_simple;
types.unwrap_map_simple = function keepSection(o) {
  const out = plainUnwrap(o);
  Object.defineProperty(out, sectionOf, { value: o, enumerable: false });
  return out;
};

export const isTyped = (v: unknown): v is Typed =>
  typeof v === 'object' && v !== null && typeof (v as Typed).toRheaTyped === 'function';

/** Type codes whose JavaScript value re-encodes to the same AMQP type: no need to keep them. */
const roundTrips = new Set([0x40, 0x41, 0x42, 0x56, 0xa0, 0xb0, 0xa1, 0xb1]);

/** The map's entries, each value kept typed where its plain value would re-encode to another type. */
function typedEntries(section: { value: unknown[] }, into: Record<string, unknown>): Record<string, unknown> {
  const items = section.value;
  for (let i = 0; i + 1 < items.length; i += 2) {
    const key = String(types.unwrap(items[i], true));
    const value = items[i + 1];
    if (isTyped(value) && !roundTrips.has(value.type.typecode) && key in into) into[key] = value;
  }
  return into;
}

/**
 * Replaces the decoded application properties of a message fresh off the wire with values that
 * re-encode to their original AMQP types. Messages built here (not decoded) pass unchanged.
 */
export function keepWireTypes(m: Message): Message {
  const props = m.application_properties as Record<string, unknown> | undefined;
  const section = props ? (props as Record<symbol, { value: unknown[] }>)[sectionOf] : undefined;
  if (!props || !section) return m;
  m.application_properties = typedEntries(section, { ...props });
  return m;
}

/**
 * A map field of a settlement outcome (the properties an abandon, defer or dead-letter adds),
 * typed as the client sent it: `raw` is the field as it came in the outcome's list.
 */
export function typedMapField(
  plain: Record<string, unknown> | undefined,
  raw: unknown,
): Record<string, unknown> | undefined {
  if (!plain || !isTyped(raw) || !Array.isArray(raw.value)) return plain;
  return typedEntries(raw as { value: unknown[] }, { ...plain });
}

/** A property's value as filters compare it: kept AMQP types unwrapped to their JavaScript value. */
export function plainValue(v: unknown): unknown {
  return isTyped(v) ? types.unwrap(v, true) : v;
}
