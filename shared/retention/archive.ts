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

/**
 * The n-th blob of a day's shard: the name itself, then `{name}-1.jsonl.gz`, ...: where its orders
 * go once the blob before is in the archive tier (purged long after they ended).
 */
export const archiveBlobInChain = (blobName: string, n: number): string =>
  n === 0 ? blobName : blobName.replace(/(\.jsonl\.gz)?$/, `-${n}.jsonl.gz`);

/** Azure's (and Azurite's) answer to reading or writing a blob in the archive tier. */
const isArchived = (e: unknown): boolean => (e as { code?: string }).code === 'BlobArchived';

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

  /**
   * Archives the documents: after it returns, each is committed exactly once, in the blob the
   * answer names for its order id: the one asked for, or (once that one is in the archive tier,
   * where blobs can be neither read nor written) the next blob of its day and shard.
   */
  async append(entries: ArchiveEntry[]): Promise<Map<string, string>> {
    const byBlob = new Map<string, ArchiveEntry[]>();
    for (const e of entries) byBlob.set(e.blobName, [...(byBlob.get(e.blobName) ?? []), e]);
    const placed = new Map<string, string>();
    for (const found of await Promise.all([...byBlob].map(([name, list]) => this.appendTo(name, list)))) {
      for (const [orderId, name] of found) placed.set(orderId, name);
    }
    return placed;
  }

  /**
   * Reads the chain of the blob's names (itself, then `-1`, `-2`, ...) up to the first that does
   * not exist: an order already committed in one that can be read is not added again. The missing
   * ones go to the first that is online (or the free name), committed with the ETag read.
   */
  private async appendTo(blobName: string, entries: ArchiveEntry[]): Promise<Map<string, string>> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const placed = new Map<string, string>();
      let target: { name: string; committed: string[]; etag?: string } | undefined;
      for (let n = 0; ; n++) {
        const name = archiveBlobInChain(blobName, n);
        const list = await this.blockList(name);
        if (list === 'archived') continue;
        for (const e of entries) {
          if (list && list.committed.includes(blockIdOf(e.document.orderId)))
            placed.set(e.document.orderId, name);
        }
        target ??= list ? { name, ...list } : { name, committed: [] };
        if (list === null) break;
      }
      const missing = entries.filter((e) => !placed.has(e.document.orderId));
      if (missing.length === 0 || !target) return placed;
      const blob = this.container.getBlockBlobClient(target.name);
      try {
        for (const e of missing) {
          const line = gzipSync(Buffer.from(`${JSON.stringify(e.document)}\n`, 'utf8'));
          await blob.stageBlock(blockIdOf(e.document.orderId), line, line.length);
        }
        const ids = [...target.committed, ...new Set(missing.map((e) => blockIdOf(e.document.orderId)))];
        await blob.commitBlockList(ids, {
          conditions: target.etag !== undefined ? { ifMatch: target.etag } : { ifNoneMatch: '*' },
          blobHTTPHeaders: { blobContentType: 'application/gzip' },
        });
        for (const e of missing) placed.set(e.document.orderId, target.name);
        return placed;
      } catch (e) {
        // Another writer committed first, or the lifecycle rule archived the blob meanwhile.
        const status = httpStatusOf(e);
        if (status !== 412 && status !== 409) throw e;
        await new Promise((r) => setTimeout(r, Math.random() * 50 * (attempt + 1)));
      }
    }
    throw new Error(`archive blob ${blobName}: too many concurrent writers`);
  }

  /**
   * A blob's committed blocks and ETag; null when it does not exist; 'archived' when it is in the
   * archive tier (or on its way back from it). The tier is asked first: Azure refuses to read or
   * write an archived blob, and Azurite would let a commit overwrite it, so neither is tried.
   */
  private async blockList(name: string): Promise<{ committed: string[]; etag?: string } | null | 'archived'> {
    const blob = this.container.getBlockBlobClient(name);
    try {
      const properties = await blob.getProperties();
      if (properties.accessTier === 'Archive' || properties.archiveStatus !== undefined) return 'archived';
      const list = await blob.getBlockList('committed');
      return {
        committed: (list.committedBlocks ?? []).map((b) => b.name),
        ...(list.etag ? { etag: list.etag } : {}),
      };
    } catch (e) {
      if (httpStatusOf(e) === 404) return null;
      if (isArchived(e)) return 'archived';
      throw e;
    }
  }

  /** Every document of a blob (an operator's read or a test's count). */
  async readBlob(blobName: string): Promise<ArchivedOrder[]> {
    let body: Buffer;
    const blob = this.container.getBlockBlobClient(blobName);
    try {
      body = await blob.downloadToBuffer();
    } catch (e) {
      if (httpStatusOf(e) === 404) return [];
      if (isArchived(e)) {
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
