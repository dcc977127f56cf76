import { appendFileSync } from 'node:fs';

/**
 * A trace of every call-gate decision, one JSON line each, for the bench's breakdown of where a
 * limit's throughput goes (bench/callLimits.ts joins it with the service's own request log).
 * Off unless CALL_BUDGET_TRACE_FILE names a file; never used in production. Lines are short and
 * appended whole, so several processes may share the file.
 */
const file = process.env.CALL_BUDGET_TRACE_FILE;

export interface TraceEvent {
  ev:
    | 'arrive'
    | 'hold'
    | 'start'
    | 'send'
    | 'end'
    | 'wait'
    | 'grant'
    | 'pull'
    | 'pull-end'
    | 'give-back'
    | 'token'
    | 'renew'
    | 'look'
    | 'wire';
  inst: string;
  t: number;
  [field: string]: unknown;
}

/** Whether the trace is on (a line's costlier fields are built only then). */
export const tracing = file !== undefined;

export function traceCall(e: TraceEvent): void {
  if (!file) return;
  try {
    appendFileSync(file, `${JSON.stringify(e)}\n`);
  } catch {
    // a trace is best effort
  }
}
