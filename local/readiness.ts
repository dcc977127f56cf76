import { orderIdFromIdempotencyKey } from '../shared/domain/index.js';
import type { Stack } from './stack.js';
import { tunableSettings } from './startOptions.js';
import { sampleOrder } from './orderClient.js';
import { operatorRouteLines } from './operatorRoutes.js';

/**
 * The one block `npm start` prints when everything listens: where things are, the key, the
 * settings in effect, and two curl lines to try. Tests parse the curl lines, so their shape
 * (`curl ... -X POST <url> ... -d '<json>'`) is part of the contract.
 */

export interface ReadinessInfo {
  stack: Pick<
    Stack,
    'baseUrl' | 'functionKey' | 'operatorKey' | 'env' | 'azurite' | 'serviceBus' | 'remote'
  > & {
    host(): { functions: Array<{ name: string; trigger: string; detail: string }> } | undefined;
  };
  readyMs: number;
  dataDir: string;
  inMemory: boolean;
  keySource: string;
  /** Where the operator credential came from, e.g. FUNCTIONS_LOCAL_OPERATOR_KEY. */
  operatorKeySource: string;
}

export const exampleIdempotencyKey = 'try-it-order-1';

/** Shell single-quoting. */
function sq(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

export function submitCurl(baseUrl: string, key: string): string {
  const body = JSON.stringify(sampleOrder('customer-42'));
  return (
    `curl -i -X POST ${baseUrl}/orders -H ${sq(`x-functions-key: ${key}`)} ` +
    `-H 'content-type: application/json' -H ${sq(`Idempotency-Key: ${exampleIdempotencyKey}`)} -d ${sq(body)}`
  );
}

export function pollCurl(baseUrl: string, key: string): string {
  const orderId = orderIdFromIdempotencyKey(exampleIdempotencyKey);
  return `curl -s ${baseUrl}/orders/${orderId} -H ${sq(`x-functions-key: ${key}`)}`;
}

/** An operator call: the operator credential, never the function key (see shared/http/operatorAuth.ts). */
export function listErrorsCurl(baseUrl: string, operatorKey: string): string {
  return `curl -s '${baseUrl}/orders?state=Error' -H ${sq(`Authorization: Bearer ${operatorKey}`)}`;
}

export function readinessBlock(info: ReadinessInfo): string {
  const { stack } = info;
  const base = stack.baseUrl;
  const routes = (stack.host()?.functions ?? [])
    .filter((f) => f.trigger === 'http')
    .map((f) => {
      const m = /^\[([^\]]+)\]\s+(\S+)/.exec(f.detail);
      return m ? { method: m[1], url: m[2], name: f.name } : { method: '', url: f.detail, name: f.name };
    })
    .sort((a, b) => a.url.localeCompare(b.url) || a.method.localeCompare(b.method));
  const width = Math.max(...routes.map((r) => r.url.length), 0);
  const lines = [
    '',
    `Order processing is running locally (ready in ${(info.readyMs / 1000).toFixed(1)} s).`,
    '',
    `  API base          ${base}`,
    ...routes.map((r) => `    ${r.method.padEnd(5)} ${r.url.padEnd(width)}  ${r.name}`),
    `  Function key      ${stack.functionKey}`,
    `                    header x-functions-key (or ?code=); from ${info.keySource}`,
    `  Console           ${base}/console  (sign in with the operator key; docs/operations.md)`,
    `  Operator key      ${stack.operatorKey}`,
    `                    header Authorization: Bearer <key>; signs in as local-operator; ${info.operatorKeySource}`,
    `                    opens the operator routes (the function key does not), under the API base:`,
    ...operatorRouteLines().map((line) => `                      ${line}`),
    '',
    `  Service Bus       ${stack.serviceBus.connectionString}`,
    `  Azurite blob      ${stack.azurite.blobUrl ?? '-'}`,
    `  Azurite queue     ${stack.azurite.queueUrl ?? '-'}`,
    `  Azurite table     ${stack.azurite.tableUrl}`,
    `  Storage           ${stack.azurite.connectionString}`,
    `  Remote services   inventory ${stack.remote.inventory.url}  payment ${stack.remote.payment.url}  shipping ${stack.remote.shipping.url}`,
    `  Telemetry         ${stack.env.TELEMETRY_FILE ? `${stack.env.TELEMETRY_FILE} (spans and metrics, JSON lines)` : 'off (--traces writes spans and metrics to a file)'}`,
    `  Data              ${info.inMemory ? 'in memory (gone when stopped)' : `${info.dataDir} (kept across restarts; --in-memory to not keep)`}`,
    '',
    'Settings in effect',
    ...tunableSettings.map((name) => `  ${name.padEnd(26)} ${stack.env[name] ?? '(app default)'}`),
    '',
    'Try it: submit an order, then poll it (Processed after a second or two)',
    `  ${submitCurl(base, stack.functionKey)}`,
    `  ${pollCurl(base, stack.functionKey)}`,
    'As an operator: orders in Error (then POST .../orders/{orderId}/resubmit or /cancel)',
    `  ${listErrorsCurl(base, stack.operatorKey)}`,
    '',
    'Ctrl-C stops everything.',
    '',
  ];
  return lines.join('\n');
}
