import type { RpcLogCategory, RpcLogLevel } from './rpc.js';

export interface LogEntry {
  level: RpcLogLevel;
  category: RpcLogCategory | 'host';
  functionName?: string;
  invocationId?: string;
  message: string;
}

export type LogSink = (entry: LogEntry) => void;

const levelNames: Record<RpcLogLevel, string> = {
  trace: 'Trace',
  debug: 'Debug',
  information: 'Information',
  warning: 'Warning',
  error: 'Error',
  critical: 'Critical',
  none: 'None',
};

/** One line per entry: time, level, function name, invocation id, message. */
export function formatLogLine(entry: LogEntry, now: Date = new Date()): string {
  const where = entry.functionName
    ? ` ${entry.functionName}${entry.invocationId ? ` (${entry.invocationId})` : ''}`
    : ' Host';
  const message = entry.message.replace(/\r?\n/g, '\n    ');
  return `${now.toISOString()} [${levelNames[entry.level] ?? entry.level}]${where}: ${message}`;
}

export function lineSink(write: (line: string) => void, minLevel: RpcLogLevel = 'information'): LogSink {
  const order: RpcLogLevel[] = ['trace', 'debug', 'information', 'warning', 'error', 'critical', 'none'];
  const min = order.indexOf(minLevel);
  return (entry) => {
    if (order.indexOf(entry.level) < min) return;
    write(formatLogLine(entry));
  };
}
