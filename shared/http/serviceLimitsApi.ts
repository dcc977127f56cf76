import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import type { Dependencies } from '../app/ports.js';
import { settings } from '../config/settings.js';
import { loadCallBudgetSettings, type CallBudgetSettings } from '../config/callLimits.js';
import type { WorkflowVersions } from '../domain/workflowVersions.js';
import {
  declaredServiceLimits,
  serviceLimitView,
  type ServiceLimitView,
} from '../orders/serviceLimitViews.js';
import { CallBudgetTable } from '../stateStore/callBudgetTable.js';
import { ServiceHealthTable } from '../stateStore/serviceHealthTable.js';
import { requireOperator } from './operatorAuth.js';
import { problem, problemTypes } from './problem.js';

/**
 * GET /api/services/limits[?service=]: the operator's readout of the remote services' global call
 * budgets (issue 26). Reads, per service, its lease row (CallBudgets) and its health row
 * (ServiceHealth): two point reads, whatever the load. The limits are the ones the Agents of this
 * app enforce: each step's declaration overridden by the same settings functions/agents.ts reads.
 */
export interface ServiceLimitTables {
  budgets: Pick<CallBudgetTable, 'read'>;
  health: Pick<ServiceHealthTable, 'read'>;
}

let opened: Promise<ServiceLimitTables> | undefined;

/** The tables on the state store's account, opened once per process (again after a failure). */
function openTables(): Promise<ServiceLimitTables> {
  opened ??= (async () => {
    const connection = settings().stateStore;
    const [budgets, health] = await Promise.all([
      CallBudgetTable.open(connection),
      ServiceHealthTable.open(connection),
    ]);
    return { budgets, health };
  })().catch((e: unknown) => {
    opened = undefined;
    throw e;
  });
  return opened;
}

const budgetSettingsOf = new WeakMap<WorkflowVersions, CallBudgetSettings>();
function budgetSettings(workflows: WorkflowVersions): CallBudgetSettings {
  let s = budgetSettingsOf.get(workflows);
  if (!s) {
    s = loadCallBudgetSettings(declaredServiceLimits(workflows.all));
    budgetSettingsOf.set(workflows, s);
  }
  return s;
}

export async function serviceLimits(
  deps: Dependencies,
  request: HttpRequest,
  _context?: InvocationContext,
  tables: () => Promise<ServiceLimitTables> = openTables,
): Promise<HttpResponseInit> {
  const guard = requireOperator(request);
  if (!guard.ok) return guard.response;
  const config = budgetSettings(deps.workflows);
  const known = Object.keys(config.limits).sort();
  const only = request.query.get('service');
  if (only !== null && !known.includes(only)) {
    return problem(
      400,
      problemTypes.validation,
      'Unknown service',
      `No Agent calls a service named ${JSON.stringify(only.slice(0, 100))}; the services are ${known.join(', ')}.`,
    );
  }
  const { budgets, health } = await tables();
  const now = deps.clock.now();
  const services: ServiceLimitView[] = await Promise.all(
    (only === null ? known : [only]).map(async (service) => {
      const [budget, h] = await Promise.all([budgets.read(service), health.read(service)]);
      return serviceLimitView(service, config.limits[service] ?? {}, budget.row, h?.health ?? null, now);
    }),
  );
  return {
    status: 200,
    headers: { 'Cache-Control': 'no-store' },
    jsonBody: { services, leaseSeconds: config.leaseSeconds, asOf: now.toISOString() },
  };
}
