import { remoteServiceNames, type RemoteServiceName } from '../../shared/agents/remoteOperations.js';

/**
 * Faults requested by the order itself: an item whose SKU reads `FAULT:<service>:<kind>[:<n>]`.
 * The grammar is documented in README.md next to this file.
 */
export type FaultKind =
  | 'transient'
  | 'throttle'
  | 'permanent'
  | 'hang'
  | 'slow'
  | 'lost-reply'
  | 'compensation-fails'
  | 'compensation-transient';

export interface RequestedFault {
  service: RemoteServiceName;
  kind: FaultKind;
  /** Attempts affected (transient, throttle, hang, lost-reply, compensation-transient) or ms (slow). */
  n: number;
}

export const faultSkuPrefix = 'FAULT:';

const defaults: Record<FaultKind, number | undefined> = {
  transient: 2,
  throttle: 2,
  permanent: undefined,
  hang: 1,
  slow: undefined,
  'lost-reply': 1,
  'compensation-fails': undefined,
  'compensation-transient': 2,
};

export class FaultGrammarError extends Error {
  constructor(
    public readonly sku: string,
    problem: string,
  ) {
    super(`fault SKU "${sku}": ${problem}`);
    this.name = 'FaultGrammarError';
  }
}

/** Parses one SKU; undefined when it is an ordinary SKU, FaultGrammarError when malformed. */
export function parseFaultSku(sku: string): RequestedFault | undefined {
  if (!sku.startsWith(faultSkuPrefix)) return undefined;
  const [, service, kind, count, ...rest] = sku.split(':');
  if (rest.length > 0) throw new FaultGrammarError(sku, 'too many parts');
  if (!remoteServiceNames.includes(service as RemoteServiceName)) {
    throw new FaultGrammarError(sku, `service must be one of ${remoteServiceNames.join(', ')}`);
  }
  if (!(kind in defaults)) {
    throw new FaultGrammarError(sku, `kind must be one of ${Object.keys(defaults).join(', ')}`);
  }
  const faultKind = kind as FaultKind;
  const takesCount = faultKind === 'slow' || defaults[faultKind] !== undefined;
  if (count !== undefined && !takesCount) throw new FaultGrammarError(sku, `${kind} takes no count`);
  if (count === undefined && faultKind === 'slow') throw new FaultGrammarError(sku, 'slow needs :<ms>');
  let n = defaults[faultKind] ?? 0;
  if (count !== undefined) {
    n = Number(count);
    if (!/^\d+$/.test(count) || !Number.isSafeInteger(n)) {
      throw new FaultGrammarError(sku, `"${count}" is not a non-negative integer`);
    }
  }
  return { service: service as RemoteServiceName, kind: faultKind, n };
}

/** The faults an order asks of one service; throws FaultGrammarError for any malformed fault SKU. */
export function faultsFor(service: RemoteServiceName, skus: readonly string[]): RequestedFault[] {
  const all = skus.map(parseFaultSku).filter((f): f is RequestedFault => f !== undefined);
  return all.filter((f) => f.service === service);
}

/** The SKU that asks `service` for a fault, for tests and demos. */
export function faultSku(service: RemoteServiceName, kind: FaultKind, n?: number): string {
  return n === undefined ? `${faultSkuPrefix}${service}:${kind}` : `${faultSkuPrefix}${service}:${kind}:${n}`;
}
