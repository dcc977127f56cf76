import type { LogMode } from './startOptions.js';

/**
 * Turns the stack's log lines (`[host] 2026-... [Information] scheduler (id): {"msg":...}`) into
 * what `npm start` shows: compact by default (time, function, message and its fields, no
 * Executing/Executed pairs), only warnings and errors with --quiet, everything with --verbose.
 */

const hostLine =
  /^\[host\] (\d{4}-\d\d-\d\dT(\d\d:\d\d:\d\d\.\d{3})Z) \[(\w+)\] (\S+)(?: \([^)]*\))?: (.*)$/s;
const problemLevels = new Set(['Warning', 'Error', 'Critical']);

function shortValue(key: string, value: unknown): string {
  if (typeof value === 'string') {
    // Order ids are UUIDs; the first block is enough to follow one order by eye.
    if (key === 'orderId' && /^[0-9a-f]{8}-/.test(value)) return value.slice(0, 8);
    return /\s/.test(value) ? JSON.stringify(value) : value;
  }
  return JSON.stringify(value);
}

function compactMessage(message: string): string {
  if (!message.startsWith('{')) return message;
  try {
    const { msg, ...fields } = JSON.parse(message) as Record<string, unknown>;
    const rest = Object.entries(fields)
      .filter(([k, v]) => v !== undefined && v !== null && k !== 'actor' && k !== 'agent')
      .map(([k, v]) => `${k === 'orderId' ? 'order' : k}=${shortValue(k, v)}`);
    return [String(msg ?? ''), ...rest].join(' ');
  } catch {
    return message;
  }
}

/** The line to print for one stack line, or undefined to drop it. */
export function formatStackLine(line: string, mode: LogMode): string | undefined {
  if (mode === 'verbose') return line;
  const m = hostLine.exec(line);
  if (!m) {
    // Not a function log: start-up banners, connection chatter, per-request lines of the demo
    // services. Keep only what looks like trouble.
    if (/\b(error|fail|exception|warn)/i.test(line) && line.startsWith('[host]')) return line;
    return undefined;
  }
  const [, , time, level, where, message] = m;
  const problem = problemLevels.has(level);
  if (mode === 'quiet' && !problem) return undefined;
  if (!problem && /^Execut(ing|ed) '/.test(message)) return undefined;
  const tag = problem ? ` ${level.toUpperCase()}` : '';
  return `${time}${tag} ${where.padEnd(14)} ${compactMessage(message)}`;
}
