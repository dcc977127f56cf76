import { AzureNamedKeyCredential, TableClient, type TableServiceClientOptions } from '@azure/data-tables';
import { DefaultAzureCredential, type TokenCredential } from '@azure/identity';
import type { StateStoreConnection } from '../config/settings.js';
import { httpStatusOf } from './errors.js';
import type { StoreMetrics } from './metrics.js';

/**
 * How the table client retries a throttled or failed request (503 ServerBusy, 500
 * OperationTimedOut, 408, other 5xx, network errors): exponential back-off from 200 ms, capped at
 * 4 s, six retries (about 10 s at worst). The first retries are short because a Scheduler write
 * sits inside a step's complete-by; the SDK's own 1 s start cost orders their failure budget in
 * the storage-throttling chaos run. Past the last retry the function throws, and its message is
 * delivered again (docs/remote-calls.md).
 */
export const tableRetryOptions = Object.freeze({
  maxRetries: 6,
  retryDelayInMs: 200,
  maxRetryDelayInMs: 4_000,
});

/**
 * TableClients for a connection: a connection string locally (Azurite), a managed identity plus
 * the table service URI in Azure. Plain http (Azurite) needs allowInsecureConnection.
 */
export function tableClient(
  connection: StateStoreConnection,
  tableName: string,
  metrics?: StoreMetrics,
  credential?: TokenCredential,
): TableClient {
  const options: TableServiceClientOptions = {
    additionalPolicies: metrics ? [{ policy: metrics.policy(), position: 'perCall' }] : [],
    retryOptions: { ...tableRetryOptions },
  };
  if (connection.kind === 'connectionString') {
    const cs = connection.connectionString;
    const insecure = /DefaultEndpointsProtocol=http(;|$)/i.test(cs) || /TableEndpoint=http:/i.test(cs);
    const devStorage = /UseDevelopmentStorage=true/i.test(cs);
    return TableClient.fromConnectionString(cs, tableName, {
      ...options,
      allowInsecureConnection: insecure || devStorage,
    });
  }
  const uri = connection.tableServiceUri.replace(/\/+$/, '');
  return new TableClient(uri, tableName, credential ?? new DefaultAzureCredential(), {
    ...options,
    allowInsecureConnection: uri.startsWith('http:'),
  });
}

/** For tests that talk to Azurite with the development account key over a URL. */
export function namedKeyTableClient(
  url: string,
  tableName: string,
  account: string,
  key: string,
): TableClient {
  return new TableClient(url, tableName, new AzureNamedKeyCredential(account, key), {
    allowInsecureConnection: url.startsWith('http:'),
  });
}

/** Creates the table on first use; 409 (already there) is success. */
export async function ensureTable(client: TableClient): Promise<void> {
  try {
    await client.createTable();
  } catch (e) {
    if (httpStatusOf(e) !== 409) throw e;
  }
}
