/**
 * A remote service's health as the Agents see it: consecutive operational failures (a stalled
 * call, or one cut off at complete-by after failures) and whether the current outage has been
 * alerted. One outage, one alert: the alert is raised when the count reaches the threshold, and
 * only an answer from the service (a success or a business refusal) closes the outage.
 */
export interface ServiceHealth {
  consecutiveFailures: number;
  /** Outages alerted so far; the open one's number names its alert. */
  outages: number;
  /** An alerted outage is open (no answer since). */
  open: boolean;
  /** The open outage's alert is known to be on the queue. */
  alertSent: boolean;
  lastStatus: number | null;
  lastDetail: string | null;
  /** First failure of the current streak. */
  since: Date | null;
}

export interface ServiceFailure {
  status?: number;
  detail: string;
}

export const healthyService: Readonly<ServiceHealth> = Object.freeze({
  consecutiveFailures: 0,
  outages: 0,
  open: false,
  alertSent: false,
  lastStatus: null,
  lastDetail: null,
  since: null,
});

/** After one more failure: the new record, and whether this writer owes the outage's alert. */
export function afterFailure(
  health: ServiceHealth,
  failure: ServiceFailure,
  now: Date,
  threshold: number,
): { health: ServiceHealth; alert: boolean } {
  const next: ServiceHealth = {
    ...health,
    consecutiveFailures: health.consecutiveFailures + 1,
    lastStatus: failure.status ?? null,
    lastDetail: failure.detail.slice(0, 1000),
    since: health.consecutiveFailures === 0 ? now : health.since,
  };
  if (!next.open && next.consecutiveFailures >= threshold) {
    next.open = true;
    next.alertSent = false;
    next.outages += 1;
  }
  // Whoever finds the open outage's alert unconfirmed sends it (again): its id is the outage's,
  // so a copy is dropped by duplicate detection, and a writer that died before sending is covered.
  return { health: next, alert: next.open && !next.alertSent };
}

/** After an answer: the closed record, or null when there is nothing to close. */
export function afterAnswer(health: ServiceHealth): ServiceHealth | null {
  if (health.consecutiveFailures === 0 && !health.open) return null;
  return { ...health, consecutiveFailures: 0, open: false, alertSent: false, since: null };
}
