import { z } from 'zod';
import type { BudgetRow, CallLimits } from '../domain/callBudget.js';
import type { ServiceHealth } from '../domain/serviceHealth.js';
import { completionOf } from '../domain/waiting.js';
import type { Workflow } from '../domain/workflow.js';
import type { ReportedGrant } from '../stateStore/callBudgetTable.js';

/**
 * The operator's readout of the remote services' global call budgets (issue 26): per service the
 * limit in force, the rate it allows now, the calls started, the requests waiting for a slot and
 * the oldest of them, the 429/503 pauses, and the outage tracking. Built from the service's lease
 * row (what each instance reported at its last renewal) and its service-health row; no I/O here.
 */

const isoDate = z.string().meta({ description: 'ISO 8601 date-time (UTC).' });
/** JSON has no infinity: an absent limit is null. */
const perSecond = z.number().nonnegative().nullable();
const slots = z.number().int().nonnegative().nullable();

export const serviceLimitSchema = z.strictObject({
  service: z.string().meta({ description: "The Agent's name, which is its service's name." }),
  limits: z.strictObject({ maxCallsPerSecond: perSecond, maxConcurrentCalls: slots }).meta({
    description:
      'In force across all instances together (declared, or overridden by settings); null: no limit.',
  }),
  rateInForce: perSecond.meta({
    description:
      'Calls/s every instance together may start now: the limit times the adaptive factor, 0 while paused; null without a rate limit.',
  }),
  rateFactor: z.number().nonnegative().meta({
    description:
      'The adaptive fraction of the rate limit in force (1 while the service accepts; halved at each 429/503 pause).',
  }),
  currentRate: z.number().nonnegative().meta({
    description: 'Calls/s started over the last lease period, summed over the instances holding a share.',
  }),
  granted: z.strictObject({ rate: perSecond, concurrency: slots }).meta({
    description: 'The shares the instances hold now, summed (never above the limits); null where unlimited.',
  }),
  instances: z.number().int().nonnegative().meta({ description: 'Instances holding a live share.' }),
  waiting: z.number().int().nonnegative().meta({
    description: 'Requests sent back to their queue to wait for a call slot, as the instances last reported.',
  }),
  oldestWaiting: z
    .strictObject({
      orderId: z.string().optional(),
      since: isoDate,
      ageSeconds: z.number().nonnegative(),
    })
    .nullable()
    .meta({ description: 'The request that has waited longest for a call slot, and its order.' }),
  pauses: z.number().int().nonnegative().meta({ description: "Pauses so far on the service's 429/503." }),
  pausedUntil: isoDate.nullable().meta({ description: 'Set while paused: no instance calls before it.' }),
  lastRefusalAt: isoDate.nullable().meta({ description: 'The last 429/503 the service answered.' }),
  outage: z
    .strictObject({
      open: z.boolean(),
      consecutiveFailures: z.number().int().nonnegative(),
      outages: z.number().int().nonnegative(),
      lastStatus: z.number().int().nullable(),
      since: isoDate.nullable(),
    })
    .meta({
      description: "The Agents' outage tracking (one alert per outage): open until the service answers.",
    }),
});

export const serviceLimitsSchema = z
  .strictObject({
    services: z.array(serviceLimitSchema),
    leaseSeconds: z.number().int().positive().meta({
      description: 'How often each instance renews its share and its report (CALL_BUDGET_LEASE_SECONDS).',
    }),
    asOf: isoDate,
  })
  .meta({
    description:
      "The remote services' call limits and what waits on them: one read of each service's lease row and health row.",
  });

export type ServiceLimitView = z.output<typeof serviceLimitSchema>;

/** The Agents the workflows call (approval steps call none), with their declared limits. */
export function declaredServiceLimits(
  workflows: readonly Workflow[],
): Record<string, CallLimits | undefined> {
  const declared: Record<string, CallLimits | undefined> = {};
  for (const w of workflows) {
    for (const step of w.steps) {
      if (completionOf(step) === 'approval' || step.agent in declared) continue;
      declared[step.agent] = step.limits;
    }
  }
  return declared;
}

/** A grant is counted until its expiry plus this grace, as the lease rules count it. */
const liveGraceMs = 2_000;

const finiteOrNull = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const iso = (ms: number) => new Date(ms).toISOString();

export function serviceLimitView(
  service: string,
  limits: CallLimits,
  budget: Omit<BudgetRow, 'grants'> & { grants: readonly ReportedGrant[] },
  health: ServiceHealth | null,
  now: Date,
): ServiceLimitView {
  const t = now.getTime();
  const live = budget.grants.filter((g) => typeof g.expiresAt === 'number' && g.expiresAt + liveGraceMs > t);
  const sum = (values: Array<number | null>) =>
    values.some((v) => v === null) ? null : values.reduce<number>((a, v) => a + (v ?? 0), 0);
  const rateLimit = limits.maxCallsPerSecond ?? null;
  const rateFactor = finiteOrNull(budget.rateFactor) ?? 1;
  const paused = budget.pausedUntil > t;
  let oldest: ServiceLimitView['oldestWaiting'] = null;
  for (const g of live) {
    const since = finiteOrNull(g.oldestWaitingSince) ?? 0;
    if ((g.waiting ?? 0) > 0 && since > 0 && (oldest === null || since < Date.parse(oldest.since))) {
      oldest = {
        ...(g.oldestWaitingOrder ? { orderId: g.oldestWaitingOrder } : {}),
        since: iso(since),
        ageSeconds: Math.max(0, Math.round((t - since) / 100) / 10),
      };
    }
  }
  return {
    service,
    limits: { maxCallsPerSecond: rateLimit, maxConcurrentCalls: limits.maxConcurrentCalls ?? null },
    rateInForce: rateLimit === null ? null : paused ? 0 : round(rateLimit * rateFactor),
    rateFactor: round(rateFactor),
    currentRate: round(live.reduce((a, g) => a + (finiteOrNull(g.startedPerSecond) ?? 0), 0)),
    granted: {
      rate: rateLimit === null ? null : round(sum(live.map((g) => finiteOrNull(g.rate))) ?? 0),
      concurrency:
        limits.maxConcurrentCalls === undefined
          ? null
          : (sum(live.map((g) => finiteOrNull(g.concurrency))) ?? 0),
    },
    instances: live.length,
    waiting: live.reduce((a, g) => a + (finiteOrNull(g.waiting) ?? 0), 0),
    oldestWaiting: oldest,
    pauses: budget.pauses,
    pausedUntil: paused ? iso(budget.pausedUntil) : null,
    lastRefusalAt: budget.refusedAt > 0 ? iso(budget.refusedAt) : null,
    outage: {
      open: health?.open ?? false,
      consecutiveFailures: health?.consecutiveFailures ?? 0,
      outages: health?.outages ?? 0,
      lastStatus: health?.lastStatus ?? null,
      since: health?.since ? health.since.toISOString() : null,
    },
  };
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}
