import { gunzipSync, gzipSync } from 'node:zlib';
import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob';
import { DefaultAzureCredential, type TokenCredential } from '@azure/identity';
import type { ArchiveConnection } from '../config/retentionSettings.js';
import { httpStatusOf } from '../stateStore/errors.js';

/** The container the Bicep deploys with its lifecycle rule (infra/app/archive.bicep). */
export const archiveContainer = 'order-archive';

/** One purged order as archived: everything the operator could read of it, history included. */
export interface ArchivedOrder {
  orderId: string;
  archivedAt: string;
  /** The order document (the submission). */
  order: Record<string, unknown>;
  /** The final process state with its steps. */
  state: Record<string, unknown>;
  history: Record<string, unknown>[];
}

export interface ArchiveEntry {
  blobName: string;
  document: ArchivedOrder;
}

/**
 * The blob is in the archive tier (the lifecycle rule moves it there): it cannot be read until it
 * is rehydrated to an online tier, which takes hours.
 */
export class ArchiveOffline extends Error {
  constructor(
    readonly blobName: string,
    /** Azure's rehydration state (`rehydrate-pending-to-cool`, ...), absent when none was asked for. */
    readonly rehydration?: string,
  ) {
    super(`archive blob ${blobName} is in the archive tier`);
    this.name = 'ArchiveOffline';
  }
}

/** Every block of a blob needs an id of one length: the order id (a 36-character UUID) is one. */
const blockIdOf = (orderId: string): string => Buffer.from(orderId, 'utf8').toString('base64');

/**
 * The order archive in Blob Storage: per day and shard one block blob of gzip'd JSON lines
 * (domain/retention.ts archiveBlobName), one block per order whose id is the order's. A gzip member
 * per block makes the whole blob one valid gzip stream (members concatenate). An order is archived
 * exactly once however often a purge is retried: a block already in the committed list is not
 * added again, and the list is committed with the ETag it was read with, so two purges racing on a
 * blob cannot drop each other's blocks.
 */
export class OrderArchive {
  private constructor(readonly container: ContainerClient) {}

  static async open(
    connection: ArchiveConnection,
    options: { container?: string; credential?: TokenCredential } = {},
  ): Promise<OrderArchive> {
    const service =
      connection.kind === 'connectionString'
        ? BlobServiceClient.fromConnectionString(connection.connectionString)
        : new BlobServiceClient(
            connection.blobServiceUri,
            options.credential ?? new DefaultAzureCredential(),
          );
    const container = service.getContainerClient(options.container ?? archiveContainer);
    await container.createIfNotExists();
    return new OrderArchive(container);
  }

  /** Archives the documents: after it returns, each is committed in its blob exactly once. */
  async append(entries: ArchiveEntry[]): Promise<void> {
    const byBlob = new Map<string, ArchiveEntry[]>();
    for (const e of entries) byBlob.set(e.blobName, [...(byBlob.get(e.blobName) ?? []), e]);
    await Promise.all([...byBlob].map(([name, list]) => this.appendTo(name, list)));
  }

  private async appendTo(blobName: string, entries: ArchiveEntry[]): Promise<void> {
    const blob = this.container.getBlockBlobClient(blobName);
    for (let attempt = 0; attempt < 10; attempt++) {
      let committed: string[] = [];
      let etag: string | undefined;
      try {
        const list = await blob.getBlockList('committed');
        committed = (list.committedBlocks ?? []).map((b) => b.name);
        etag = list.etag;
      } catch (e) {
        if (httpStatusOf(e) !== 404) throw e;
      }
      const have = new Set(committed);
      const missing = entries.filter((e) => !have.has(blockIdOf(e.document.orderId)));
      if (missing.length === 0) return;
      for (const e of missing) {
        const line = gzipSync(Buffer.from(`${JSON.stringify(e.document)}\n`, 'utf8'));
        await blob.stageBlock(blockIdOf(e.document.orderId), line, line.length);
      }
      const ids = [...committed, ...new Set(missing.map((e) => blockIdOf(e.document.orderId)))];
      try {
        await blob.commitBlockList(ids, {
          conditions: etag !== undefined ? { ifMatch: etag } : { ifNoneMatch: '*' },
          blobHTTPHeaders: { blobContentType: 'application/gzip' },
        });
        return;
      } catch (e) {
        const status = httpStatusOf(e);
        if (status !== 412 && status !== 409) throw e;
        await new Promise((r) => setTimeout(r, Math.random() * 50 * (attempt + 1)));
      }
    }
    throw new Error(`archive blob ${blobName}: too many concurrent writers`);
  }

  /** Every document of a blob (an operator's read or a test's count). */
  async readBlob(blobName: string): Promise<ArchivedOrder[]> {
    let body: Buffer;
    const blob = this.container.getBlockBlobClient(blobName);
    try {
      body = await blob.downloadToBuffer();
    } catch (e) {
      if (httpStatusOf(e) === 404) return [];
      if ((e as { code?: string }).code === 'BlobArchived') {
        const status = await blob.getProperties().then(
          (p) => p.archiveStatus,
          () => undefined,
        );
        throw new ArchiveOffline(blobName, status);
      }
      throw e;
    }
    if (body.length === 0) return [];
    return gunzipSync(body)
      .toString('utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as ArchivedOrder);
  }

  /** The order's document in its blob, or null. */
  async read(blobName: string, orderId: string): Promise<ArchivedOrder | null> {
    return (await this.readBlob(blobName)).find((d) => d.orderId === orderId) ?? null;
  }

  /** The names of every archive blob (tests, operators). */
  async blobNames(): Promise<string[]> {
    const names: string[] = [];
    for await (const b of this.container.listBlobsFlat({ prefix: 'orders/' })) names.push(b.name);
    return names;
  }
}
