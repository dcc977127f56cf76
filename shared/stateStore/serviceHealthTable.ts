import type { TableClient } from '@azure/data-tables';
import type { TokenCredential } from '@azure/identity';
import type { StateStoreConnection } from '../config/settings.js';
import type { ServiceHealth } from '../domain/serviceHealth.js';
import { ensureTable, tableClient } from './clients.js';
import { httpStatusOf } from './errors.js';

/**
 * One row per remote service (PartitionKey 'service-health', RowKey = the service): the Agents'
 * shared view of its health. Every write is ETag-guarded (or an insert that fails if the row
 * exists), so concurrent Agents never lose a count and only one of them opens an outage.
 */
export const serviceHealthPartition = 'service-health';

export interface StoredHealth {
  health: ServiceHealth;
  etag: string;
}

/** Another Agent wrote the row since it was read: re-read and decide again. */
export class HealthWriteConflict extends Error {
  constructor(service: string) {
    super(`service health of ${service} changed concurrently`);
    this.name = 'HealthWriteConflict';
  }
}

const num = (v: unknown): number => (typeof v === 'number' ? v : 0);

export class ServiceHealthTable {
  constructor(readonly client: TableClient) {}

  static async open(
    connection: StateStoreConnection,
    tableName = 'ServiceHealth',
    credential?: TokenCredential,
  ): Promise<ServiceHealthTable> {
    const client = tableClient(connection, tableName, undefined, credential);
    await ensureTable(client);
    return new ServiceHealthTable(client);
  }

  async read(service: string): Promise<StoredHealth | null> {
    try {
      const row = await this.client.getEntity<Record<string, unknown>>(serviceHealthPartition, service);
      return {
        etag: row.etag,
        health: {
          consecutiveFailures: num(row.ConsecutiveFailures),
          outages: num(row.Outages),
          open: row.Open === true,
          alertSent: row.AlertSent === true,
          lastStatus: typeof row.LastStatus === 'number' ? row.LastStatus : null,
          lastDetail: typeof row.LastDetail === 'string' ? row.LastDetail : null,
          since:
            row.Since instanceof Date
              ? row.Since
              : typeof row.Since === 'string'
                ? new Date(row.Since)
                : null,
        },
      };
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      throw e;
    }
  }

  /** Writes `health` if the row is still as read (`etag`), or creates it when `etag` is null. */
  async write(service: string, health: ServiceHealth, etag: string | null): Promise<void> {
    const entity = {
      partitionKey: serviceHealthPartition,
      rowKey: service,
      ConsecutiveFailures: health.consecutiveFailures,
      Outages: health.outages,
      Open: health.open,
      AlertSent: health.alertSent,
      ...(health.lastStatus !== null ? { LastStatus: health.lastStatus } : {}),
      ...(health.lastDetail !== null ? { LastDetail: health.lastDetail } : {}),
      ...(health.since !== null ? { Since: health.since } : {}),
    };
    try {
      if (etag === null) await this.client.createEntity(entity);
      else await this.client.updateEntity(entity, 'Replace', { etag });
    } catch (e) {
      const status = httpStatusOf(e);
      if (status === 412 || status === 409) throw new HealthWriteConflict(service);
      throw e;
    }
  }
}
