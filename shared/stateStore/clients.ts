import { AzureNamedKeyCredential, TableClient, type TableServiceClientOptions } from '@azure/data-tables';
import type { HttpClient } from '@azure/core-rest-pipeline';
import { DefaultAzureCredential, type TokenCredential } from '@azure/identity';
import type { StateStoreConnection } from '../config/settings.js';
import { httpStatusOf } from './errors.js';
import type { StoreMetrics } from './metrics.js';

/**
 * How the table client retries a throttled or failed request (503 ServerBusy, 500
 * OperationTimedOut, 408, other 5xx, network errors): the SDK pipeline's exponential policy from
 * 1 s, three retries. Past the last retry the function throws and its message is delivered again.
 * Shorter first delays (200 ms, six retries) were tried against the storage-throttling chaos run
 * and did no better on this machine, so the SDK's default shape stays.
 */
export const tableRetryOptions = Object.freeze({ maxRetries: 3 });

/**
 * TableClients for a connection: a connection string locally (Azurite), a managed identity plus
 * the table service URI in Azure. Plain http (Azurite) needs allowInsecureConnection.
 */
export function tableClient(
  connection: StateStoreConnection,
  tableName: string,
  metrics?: StoreMetrics,
  credential?: TokenCredential,
  httpClient?: HttpClient,
): TableClient {
  const options: TableServiceClientOptions = {
    additionalPolicies: metrics ? [{ policy: metrics.policy(), position: 'perCall' }] : [],
    retryOptions: { ...tableRetryOptions },
    // Absent: the process's one shared client (one pool of kept-alive connections for all tables).
    ...(httpClient ? { httpClient } : {}),
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
