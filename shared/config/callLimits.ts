import { isLimited, type CallLimits } from '../domain/callBudget.js';
import { defaultCustomerShare } from '../domain/callLine.js';
import { integer, SettingsError } from './settings.js';

/**
 * The Agents' global call limits (issue 26): each Agent's declared limits, overridden per service
 * by settings, and how the budget is shared. Read once at start-up; a bad value fails naming it.
 */
export interface CallBudgetSettings {
  /** Per Agent name: the limits in force (absent fields: no limit of that kind). */
  limits: Record<string, CallLimits>;
  /** How often an instance renews its share of a service's budget (CALL_BUDGET_LEASE_SECONDS). */
  leaseSeconds: number;
  /** The most of a limited service one customer takes while others wait (CALL_BUDGET_CUSTOMER_SHARE). */
  customerShare: number;
  /**
   * How old an instance's news of a pause may be when it starts a call (CALL_BUDGET_PAUSE_NEWS_SECONDS;
   * shared/agents/pauseNews.ts): older, it reads the lease row first. 0: never reads for it.
   */
  pauseNewsSeconds: number;
}

export const callBudgetSettingNames = {
  leaseSeconds: 'CALL_BUDGET_LEASE_SECONDS',
  customerShare: 'CALL_BUDGET_CUSTOMER_SHARE',
  pauseNewsSeconds: 'CALL_BUDGET_PAUSE_NEWS_SECONDS',
} as const;

const prefix = (agent: string) => agent.toUpperCase().replace(/-/g, '_');
export const maxCallsPerSecondSetting = (agent: string) => `${prefix(agent)}_MAX_CALLS_PER_SECOND`;
export const maxConcurrentCallsSetting = (agent: string) => `${prefix(agent)}_MAX_CONCURRENT_CALLS`;

type Env = Record<string, string | undefined>;

function raw(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v === undefined || v === '' ? undefined : v;
}

/** A positive number, `none` (lift the declared limit), or the declared value when unset. */
function limit(env: Env, name: string, declared: number | undefined, integer: boolean): number | undefined {
  const v = raw(env, name);
  if (v === undefined) return declared;
  if (v.toLowerCase() === 'none') return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n)) || n > 1_000_000) {
    throw new SettingsError(
      name,
      `must be ${integer ? 'an integer' : 'a number'} from ${integer ? 1 : '>0'} to 1000000, or "none", got "${v}"`,
    );
  }
  return n;
}

export function loadCallBudgetSettings(
  declared: Record<string, CallLimits | undefined>,
  env: Env = process.env,
): CallBudgetSettings {
  const limits: Record<string, CallLimits> = {};
  for (const [agent, d] of Object.entries(declared)) {
    const maxCallsPerSecond = limit(env, maxCallsPerSecondSetting(agent), d?.maxCallsPerSecond, false);
    const maxConcurrentCalls = limit(env, maxConcurrentCallsSetting(agent), d?.maxConcurrentCalls, true);
    limits[agent] = {
      ...(maxCallsPerSecond !== undefined ? { maxCallsPerSecond } : {}),
      ...(maxConcurrentCalls !== undefined ? { maxConcurrentCalls } : {}),
    };
  }
  const leaseSeconds = integer(env, callBudgetSettingNames.leaseSeconds, 5, 1, 60);
  const share = raw(env, callBudgetSettingNames.customerShare);
  const customerShare = share === undefined ? defaultCustomerShare : Number(share);
  if (!Number.isFinite(customerShare) || customerShare <= 0 || customerShare > 1) {
    throw new SettingsError(
      callBudgetSettingNames.customerShare,
      `must be a fraction above 0 and at most 1, got "${share}"`,
    );
  }
  // 0: never look.
  const pauseNewsSeconds = integer(env, callBudgetSettingNames.pauseNewsSeconds, 1, 0, 60);
  return { limits, leaseSeconds, customerShare, pauseNewsSeconds };
}

export { isLimited };
