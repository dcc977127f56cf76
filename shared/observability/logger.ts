import type { InvocationContext } from '@azure/functions';

/**
 * Structured logs: every line is one JSON object carrying the order id, step and attempt it
 * concerns, written through the InvocationContext so Application Insights records it as a trace
 * of that invocation (query with `parse_json(message)`).
 */
export interface LogFields {
  orderId?: string;
  step?: string;
  attempt?: number;
  kind?: string;
  run?: number;
  [key: string]: unknown;
}

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  with(fields: LogFields): Logger;
}

type Sink = Pick<InvocationContext, 'info' | 'warn' | 'error'>;

export function logger(sink: Sink, base: LogFields = {}): Logger {
  const line = (msg: string, fields?: LogFields) => JSON.stringify({ msg, ...base, ...fields });
  return {
    info: (msg, fields) => sink.info(line(msg, fields)),
    warn: (msg, fields) => sink.warn(line(msg, fields)),
    error: (msg, fields) => sink.error(line(msg, fields)),
    with: (fields) => logger(sink, { ...base, ...fields }),
  };
}

/** For code that runs outside an invocation (start-up, tests). */
export const consoleSink: Sink = {
  info: (...a: unknown[]) => console.log(...a),
  warn: (...a: unknown[]) => console.warn(...a),
  error: (...a: unknown[]) => console.error(...a),
};
