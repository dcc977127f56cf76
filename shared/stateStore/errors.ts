/** Someone else wrote the order since we read it (HTTP 412 on an ETag-guarded write). */
export class ConcurrencyConflict extends Error {
  constructor(
    public readonly orderId: string,
    cause?: unknown,
  ) {
    super(`order ${orderId} was changed by another writer; re-read and decide again`, { cause });
    this.name = 'ConcurrencyConflict';
  }
}

/** Submission of an orderId that is already stored. Carries the stored body hash to compare. */
export class OrderAlreadyExists extends Error {
  constructor(
    public readonly orderId: string,
    public readonly requestHash: string | undefined,
  ) {
    super(`order ${orderId} already exists`);
    this.name = 'OrderAlreadyExists';
  }
}

/** applyWithRetry lost the race too many times in a row. */
export class TooManyConflicts extends Error {
  constructor(
    public readonly orderId: string,
    public readonly attempts: number,
  ) {
    super(`order ${orderId}: ${attempts} concurrent-write conflicts in a row`);
    this.name = 'TooManyConflicts';
  }
}

export class OrderNotFound extends Error {
  constructor(public readonly orderId: string) {
    super(`order ${orderId} not found`);
    this.name = 'OrderNotFound';
  }
}

/** Duck-typed: RestError from @azure/core-rest-pipeline, also inside a failed transaction. */
export function httpStatusOf(e: unknown): number | undefined {
  const status = (e as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}
