import { orderWorkflow, type OrderStep } from '../domain/orderWorkflow.js';

/**
 * The remote services the order workflow's Agents wrap, and the HTTP operation behind each
 * action and its compensation, as the steps declare them. Actions map 1:1 to operation paths
 * (`POST /{operation}`).
 */
export type RemoteServiceName = OrderStep['agent'];

export const remoteServiceNames: readonly RemoteServiceName[] = orderWorkflow.steps.map((s) => s.agent);

export const remoteOperations = Object.fromEntries(
  orderWorkflow.steps.map((s) => [s.agent, { action: s.action, compensation: s.compensation }]),
) as { readonly [S in OrderStep as S['agent']]: { action: S['action']; compensation: S['compensation'] } };

export type RemoteAction = OrderStep['action'];
export type RemoteCompensation = NonNullable<OrderStep['compensation']>;
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
