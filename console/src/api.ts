/**
 * Every request the console makes: JSON to and from the operator routes, with the operator key as
 * a bearer token when the operator signed in with one (locally). In Azure there is no key: App
 * Service Authentication's session cookie goes with every same-origin fetch.
 */

const keyName = 'order-console.operator-key';

/** The routes' base: the console is served at {base}console, so its own folder is the API's. */
export const apiBase = new URL('./', window.location.href);

export function operatorKey(): string | null {
  return window.sessionStorage.getItem(keyName);
}

export function rememberOperatorKey(key: string | null): void {
  if (key) window.sessionStorage.setItem(keyName, key);
  else window.sessionStorage.removeItem(keyName);
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string | undefined,
  ) {
    super(detail ? `${title}: ${detail}` : title);
  }
}

/** Told when a route answers 401: the key is wrong or the sign-in expired. */
let onUnauthenticated: () => void = () => undefined;
export function whenUnauthenticated(handler: () => void): void {
  onUnauthenticated = handler;
}

export interface RequestOptions {
  method?: 'GET' | 'POST';
  query?: Record<string, string | number | undefined | null>;
  json?: unknown;
  /** Answers that are not errors for this caller (e.g. 409 of an action shown as its result). */
  accept?: number[];
  key?: string;
}

export function apiUrl(path: string, query: RequestOptions['query'] = {}): URL {
  const url = new URL(path, apiBase);
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, String(value));
  }
  return url;
}

export async function request<T>(
  path: string,
  options: RequestOptions = {},
): Promise<{ status: number; body: T }> {
  const headers = new Headers({ Accept: 'application/json' });
  const key = options.key ?? operatorKey();
  if (key) headers.set('Authorization', `Bearer ${key}`);
  let body: string | undefined;
  if (options.json !== undefined) {
    headers.set('Content-Type', 'application/json');
    body = JSON.stringify(options.json);
  }
  const response = await fetch(apiUrl(path, options.query), {
    method: options.method ?? 'GET',
    headers,
    body,
    credentials: 'same-origin',
    cache: 'no-store',
  });
  const text = await response.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (response.ok || options.accept?.includes(response.status)) {
    return { status: response.status, body: parsed as T };
  }
  // Only the operator guard and the platform answer 401 with a Bearer challenge: the sign-in is
  // gone. A bare 401 is the host asking for a function key, which no operator holds.
  if (response.status === 401 && /^Bearer\b/i.test(response.headers.get('www-authenticate') ?? '')) {
    onUnauthenticated();
  }
  const problem = (parsed ?? {}) as { title?: string; detail?: string };
  throw new ApiError(response.status, problem.title ?? `${path}: HTTP ${response.status}`, problem.detail);
}

export async function get<T>(path: string, query?: RequestOptions['query']): Promise<T> {
  return (await request<T>(path, { query })).body;
}

// ---- The shapes the operator routes answer (docs: /api/openapi.json) ----

export const processStates = [
  'Pending',
  'Processing',
  'Processed',
  'Compensating',
  'Compensated',
  'Error',
] as const;
export type ProcessState = (typeof processStates)[number];
export const terminalStates: readonly ProcessState[] = ['Processed', 'Compensated', 'Error'];

export interface OrderError {
  code: string;
  detail: string | null;
}

export interface OrderSummary {
  orderId: string;
  processState: ProcessState;
  failureCount: number;
  error: OrderError | null;
  updatedAt: string;
  workflow?: string;
  workflowVersion?: number;
  customerId?: string;
  createdAt?: string;
}

export interface OrderPage {
  orders: OrderSummary[];
  continuationToken?: string;
}

export interface StepView {
  name: string;
  status: string;
  attempt: number;
  compensationAttempt: number;
  lastError: string | null;
  completeBy: string | null;
  startedAt: string | null;
  completedAt: string | null;
  compensatedAt: string | null;
  /** A waiting step (a callback or an approval): when its wait began. */
  waitingSince?: string;
  /** The remote service's reference for work it accepted. */
  reference?: string;
}

export interface OrderView {
  orderId: string;
  processState: ProcessState;
  failureCount: number;
  completeBy: string | null;
  lockedBy: string | null;
  run: number;
  compensationReason: string | null;
  error: OrderError | null;
  createdAt: string;
  updatedAt: string;
  customerId?: string;
  steps: StepView[];
}

export interface HistoryEntry {
  at: string;
  actor: string;
  by?: string;
  event: string;
  step?: string;
  attempt?: number;
  run?: number;
  workflow?: string;
  workflowVersion?: number;
  outcome?: string;
  error?: string;
  traceId?: string;
}

export interface HistoryPage {
  orderId: string;
  entries: HistoryEntry[];
  continuationToken?: string;
}

export interface Counts {
  counts: Record<ProcessState, number>;
  inFlight: number;
  oldestInFlight: { orderId: string; ageSeconds: number; boundSeconds: number } | null;
  asOf: string;
}

export interface Change {
  orderId: string;
  processState: ProcessState;
  updatedAt: string;
}

export interface ChangesPage {
  changes: Change[];
  cursor: string;
}

export interface Accepted {
  orderId: string;
  processState: ProcessState;
}

export type BulkAction = 'resubmit' | 'cancel' | 'retry';

export interface BulkFilter {
  state: ProcessState;
  workflowVersion?: number;
  customerId?: string;
  from?: string;
  to?: string;
}

export interface BulkPreview {
  action: BulkAction;
  matched: number;
  orderIds: string[];
  confirm: string;
  expiresAt: string;
}

export interface BulkResults {
  action: BulkAction;
  results: Array<{ orderId: string; status: number; detail?: string }>;
}

export interface DeadLetterCount {
  entity: string;
  count: number;
}

export interface DeadLetter {
  sequenceNumber: string;
  messageId: string;
  reason: string;
  description: string;
  deliveryCount: number;
  enqueuedAt: string;
  orderId: string | null;
  body: unknown;
}

export interface DeadLetterResults {
  results: Array<{ sequenceNumber: string; status: string; newMessageId?: string; orderId?: string }>;
}

export interface ServiceLimit {
  service: string;
  limits: { maxCallsPerSecond: number | null; maxConcurrentCalls: number | null };
  rateInForce: number | null;
  rateFactor: number;
  currentRate: number;
  granted: { rate: number | null; concurrency: number | null };
  instances: number;
  waiting: number;
  oldestWaiting: { orderId?: string; since: string; ageSeconds: number } | null;
  pauses: number;
  pausedUntil: string | null;
  lastRefusalAt: string | null;
  outage: {
    open: boolean;
    consecutiveFailures: number;
    outages: number;
    lastStatus: number | null;
    since: string | null;
  };
}

export interface ServiceLimits {
  services: ServiceLimit[];
  leaseSeconds: number;
  asOf: string;
}

export interface RetentionReadout {
  orderRetentionDays: number;
  idempotencyRetentionDays: number;
  archive: boolean;
  oldestRetained: { orderId: string; processState: ProcessState; since: string } | null;
  pastRetentionWaiting: number;
  waitingCapped: boolean;
  lastPurge: { lastRunAt?: string; lastPurged?: number; lastPurgedAt?: string; lastError?: string };
  held: Array<{ orderId: string; heldBy: string; heldAt: string; reason?: string }>;
}

export interface HoldView {
  orderId: string;
  held: boolean;
  heldBy?: string;
  heldAt?: string;
  reason?: string;
}

/** A purged order as GET console/orders/{id} answers it: its archive document. */
export interface ArchivedOrderView {
  orderId: string;
  archived: true;
  purgedAt: string;
  archive: string;
  order: Record<string, unknown>;
  state: Record<string, unknown>;
  history: Array<Record<string, unknown>>;
}
