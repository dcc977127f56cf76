/**
 * Issue 26's throughput figures, from the service's own log. The whole run's figure
 * `(charges - 1) / (last - first)` includes the tail where fewer requests than the limit remain
 * unstarted, which no limiter can fill; the backlog figure stops when fewer than `rate` orders
 * remain unstarted. Both start at the first call: the grants' ramp-up is the limiter's own cost.
 */
export interface ThroughputFigures {
  /** Calls per second from the first start to the last. */
  whole: number;
  /** Calls per second from the first start while at least `rate` orders remained unstarted. */
  backlog: number;
  /** Seconds each figure covers. */
  wholeSeconds: number;
  backlogSeconds: number;
  /** Starts counted in the backlog figure. */
  backlogStarts: number;
}

/** `starts`: each order's first call (epoch ms), any order; `orders`: how many were submitted. */
export function throughputFigures(
  starts: readonly number[],
  orders: number,
  rate: number,
): ThroughputFigures {
  const at = [...starts].sort((a, b) => a - b);
  const per = (n: number, ms: number) => (n > 0 && ms > 0 ? (n * 1000) / ms : Number.NaN);
  const wholeMs = at.length > 0 ? at[at.length - 1] - at[0] : 0;
  // After the k-th start (1-based) orders - k remain unstarted: the backlog lasts while that is >= rate.
  const last = Math.min(at.length, Math.max(0, orders - Math.ceil(rate)));
  const backlogMs = last > 0 ? at[last - 1] - at[0] : 0;
  return {
    whole: per(at.length - 1, wholeMs),
    backlog: per(last - 1, backlogMs),
    wholeSeconds: wholeMs / 1000,
    backlogSeconds: backlogMs / 1000,
    backlogStarts: last,
  };
}

/**
 * Calls per second in the whole seconds (from the first start) that began with at least `rate`
 * requests at the Agents' gates, arrived and not started: seconds a limiter could have filled.
 * The order-based backlog figure also counts orders still upstream (the Scheduler, inventory),
 * which on a machine slower than the limit never reach the gate that fast. From the gate trace:
 * `arrivals` and `starts` map each request to when it first reached a gate and when it started.
 */
export function gateBacklogFigure(
  arrivals: ReadonlyMap<string, number>,
  starts: ReadonlyMap<string, number>,
  rate: number,
): { perSecond: number; seconds: number; starts: number } {
  const first = Math.min(...starts.values());
  const last = Math.max(...starts.values());
  let seconds = 0;
  let counted = 0;
  for (let from = first; from <= last; from += 1000) {
    let waiting = 0;
    for (const [key, at] of arrivals) {
      const s = starts.get(key);
      if (at < from && (s === undefined || s >= from)) waiting += 1;
    }
    if (waiting < rate) continue;
    seconds += 1;
    for (const s of starts.values()) if (s >= from && s < from + 1000) counted += 1;
  }
  return { perSecond: seconds > 0 ? counted / seconds : Number.NaN, seconds, starts: counted };
}
