/**
 * The remote services the order workflow's Agents wrap, and the HTTP operation behind each
 * action and its compensation. Actions map 1:1 to operation paths (`POST /{operation}`).
 */

export const remoteServiceNames = ['inventory', 'payment', 'shipping'] as const;
export type RemoteServiceName = (typeof remoteServiceNames)[number];

export const remoteOperations = {
  inventory: { action: 'reserve', compensation: 'release' },
  payment: { action: 'charge', compensation: 'refund' },
  shipping: { action: 'create-shipment', compensation: 'cancel-shipment' },
} as const satisfies Record<RemoteServiceName, { action: string; compensation: string }>;

export type RemoteAction = (typeof remoteOperations)[RemoteServiceName]['action'];
export type RemoteCompensation = (typeof remoteOperations)[RemoteServiceName]['compensation'];
export type RemoteOperation = RemoteAction | RemoteCompensation;

/** The service that performs an action or a compensation. */
export function serviceForOperation(operation: RemoteOperation): RemoteServiceName {
  for (const name of remoteServiceNames) {
    const ops = remoteOperations[name];
    if (ops.action === operation || ops.compensation === operation) return name;
  }
  throw new Error(`unknown remote operation: ${String(operation)}`);
}

export function isCompensation(operation: RemoteOperation): operation is RemoteCompensation {
  return remoteServiceNames.some((name) => remoteOperations[name].compensation === operation);
}

/** The action a compensation undoes (release → reserve, refund → charge, ...). */
export function actionCompensatedBy(compensation: RemoteCompensation): RemoteAction {
  return remoteOperations[serviceForOperation(compensation)].action;
}
