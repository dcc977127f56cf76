import { randomUUID } from 'node:crypto';
import { RateLimiter } from './rateLimit.js';
import {
  batchTarget,
  partitionInBody,
  partitionInFilter,
  partitionInPath,
  type TableRequestKind,
} from './tableProxy.js';

/**
 * Azure Table Storage's scalability targets, scaled down, enforced by the bench's table proxy:
 * entities per second per partition and requests per second per account. Past them the proxy
 * answers as the Table service does (503 ServerBusy, now and then 500 OperationTimedOut, in its
 * JSON error shape with `x-ms-error-code`) without forwarding: nothing was done, the client's
 * retry is the remedy.
 */
export interface TableLimits {
  partitionEntitiesPerSecond: number;
  accountRequestsPerSecond: number;
}

export interface Refusal {
  scope: 'partition' | 'account';
  /** `{account}/{table}/{partition}` or the account's name. */
  key: string;
  status: 500 | 503;
  code: 'ServerBusy' | 'OperationTimedOut';
  message: string;
}

/** What a request costs the partition it names: entities written, or one for a read or query. */
export interface PartitionCharge {
  key: string;
  entities: number;
}

export function partitionCharge(
  method: string,
  url: string,
  kind: TableRequestKind,
  table: string,
  body: Buffer,
): PartitionCharge | undefined {
  if (kind === 'admin') return undefined;
  if (kind === 'batch') {
    const t = batchTarget(body.toString('utf8'));
    return t ? { key: `${t.table}/${t.partition}`, entities: t.entities } : undefined;
  }
  // A query that names no partition (a scan) spans partitions: only the account limit applies.
  const partition =
    kind === 'query'
      ? partitionInFilter(url)
      : (partitionInPath(url) ??
        (method.toUpperCase() === 'POST' ? partitionInBody(body.toString('utf8')) : undefined));
  return partition === undefined ? undefined : { key: `${table}/${partition}`, entities: 1 };
}

/**
 * Both limits are per storage account: each account has its own requests per second, and a
 * partition is `{table}/{partition}` within one account (the same index partition in two accounts
 * is two partitions), as in Azure.
 */
export class TableThrottle {
  private readonly partitions: RateLimiter;
  private readonly account: RateLimiter;
  private partitionRefusals = 0;
  readonly refused = { partition: 0, account: 0 };
  /** Refusals per account name and per `{account}/{table}/{partition}`: where the limits bound. */
  readonly refusedBy: { account: Record<string, number>; partition: Record<string, number> } = {
    account: {},
    partition: {},
  };

  constructor(
    readonly limits: TableLimits,
    now?: () => number,
  ) {
    this.partitions = new RateLimiter(limits.partitionEntitiesPerSecond, now);
    this.account = new RateLimiter(limits.accountRequestsPerSecond, now);
  }

  /** Admits a request to `account` (paying its costs) or says how the service refuses it. */
  admit(charge: PartitionCharge | undefined, account = 'account'): Refusal | undefined {
    const partition = charge && `${account}/${charge.key}`;
    if (!this.account.open(account)) {
      this.refused.account += 1;
      this.refusedBy.account[account] = (this.refusedBy.account[account] ?? 0) + 1;
      return {
        scope: 'account',
        key: account,
        status: 503,
        code: 'ServerBusy',
        message: 'Operations per second is over the account limit.',
      };
    }
    if (partition && !this.partitions.open(partition)) {
      this.refused.partition += 1;
      this.refusedBy.partition[partition] = (this.refusedBy.partition[partition] ?? 0) + 1;
      // One in four as the service's timeout answer: a client must treat both alike.
      const timedOut = ++this.partitionRefusals % 4 === 0;
      return timedOut
        ? {
            scope: 'partition',
            key: partition,
            status: 500,
            code: 'OperationTimedOut',
            message: 'Operation could not be completed within the specified time.',
          }
        : {
            scope: 'partition',
            key: partition,
            status: 503,
            code: 'ServerBusy',
            message: 'The server is busy.',
          };
    }
    this.account.tryTake(account, 1);
    if (charge && partition) this.partitions.tryTake(partition, charge.entities);
    return undefined;
  }

  /** Entities a query returned beyond the one its request paid for. */
  paidRead(charge: PartitionCharge | undefined, returned: number, account = 'account'): void {
    if (charge && returned > 1) this.partitions.debit(`${account}/${charge.key}`, returned - 1);
  }
}

/** The Table service's error answer (JSON, as for `Accept: application/json;odata=...`). */
export function tableErrorResponse(refusal: Refusal): {
  status: number;
  headers: Record<string, string>;
  body: string;
} {
  const requestId = randomUUID();
  const value = `${refusal.message}\nRequestId:${requestId}\nTime:${new Date().toISOString()}`;
  return {
    status: refusal.status,
    headers: {
      'content-type': 'application/json;odata=minimalmetadata;streaming=true;charset=utf-8',
      'x-ms-error-code': refusal.code,
      'x-ms-request-id': requestId,
    },
    body: JSON.stringify({ 'odata.error': { code: refusal.code, message: { lang: 'en-US', value } } }),
  };
}
