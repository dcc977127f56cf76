import type { TableServiceClientOptions } from '@azure/data-tables';

// The pipeline policy type, taken from data-tables itself rather than a transitive package.
type PipelinePolicy = NonNullable<TableServiceClientOptions['additionalPolicies']>[number]['policy'];

/**
 * Counts what the state store costs: every HTTP request its clients send (an entity-group
 * transaction is one request, `$batch`), plus entities read, which the store adds itself
 * because the pipeline does not parse bodies.
 */
export class StoreMetrics {
  requests = 0;
  transactions = 0;
  entitiesRead = 0;
  /**
   * Queries whose filter names no PartitionKey: the service walks every partition of the table
   * for them (Azurite answers quickly anyway, Azure bills the scan's time and pages), so this is
   * what shows a listing that costs O(table) rather than O(page).
   */
  tableScans = 0;
  readonly byMethod: Record<string, number> = {};

  reset(): void {
    this.requests = 0;
    this.transactions = 0;
    this.entitiesRead = 0;
    this.tableScans = 0;
    for (const k of Object.keys(this.byMethod)) delete this.byMethod[k];
  }

  snapshot(): {
    requests: number;
    transactions: number;
    entitiesRead: number;
    tableScans: number;
    byMethod: Record<string, number>;
  } {
    return {
      requests: this.requests,
      transactions: this.transactions,
      entitiesRead: this.entitiesRead,
      tableScans: this.tableScans,
      byMethod: { ...this.byMethod },
    };
  }

  /** A pipeline policy for TableClient's `additionalPolicies` (position perCall: once per request). */
  policy(): PipelinePolicy {
    return {
      name: 'stateStoreMetrics',
      sendRequest: (request, next) => {
        this.requests += 1;
        this.byMethod[request.method] = (this.byMethod[request.method] ?? 0) + 1;
        if (/\/\$batch(\?|$)/.test(request.url)) this.transactions += 1;
        if (request.method === 'GET' && isScan(request.url)) this.tableScans += 1;
        return next(request);
      },
    };
  }
}

/** A query (not a point read, not the table list) whose filter does not pin one partition. */
function isScan(url: string): boolean {
  const u = new URL(url);
  const last = decodeURIComponent(u.pathname).split('/').pop() ?? '';
  if (/^Tables/.test(last) || /\(PartitionKey=.*\)$/.test(last)) return false;
  return !/PartitionKey eq '/.test(u.searchParams.get('$filter') ?? '');
}
