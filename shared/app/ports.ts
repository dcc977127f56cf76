import type { Clock, Order, OrderState, Policy, ProcessState, Workflow } from '../domain/index.js';
import type { MessageBus } from '../messaging/bus.js';

/** An order as loaded from the state store, with the ETag its next write must match. */
export interface LoadedOrder {
  order: Order;
  state: OrderState;
  etag: string;
}

export interface OrderPage {
  orders: OrderState[];
  continuationToken?: string;
}

/** What the Scheduler, Supervisor and HTTP API need from the state store. */
export interface OrderStore {
  /** Writes order, state and steps atomically; throws OrderAlreadyExists when the id is taken. */
  submit(order: Order, state: OrderState): Promise<void>;
  load(orderId: string): Promise<LoadedOrder | null>;
  /** ETag-guarded replace of the state and step rows; throws ConcurrencyConflict on 412. */
  save(loaded: LoadedOrder, next: OrderState): Promise<void>;
  /** Ids of in-flight orders whose CompleteBy has passed (repairing the index on the way). */
  sweep(now: Date): Promise<string[]>;
  /** The slow repair for lost index rows; returns how many it re-created. */
  reconcile(now: Date): Promise<number>;
  listByState(state: ProcessState, pageSize: number, continuationToken?: string): Promise<OrderPage>;
}

/** Everything a function needs, built once per process from the settings (see runtime.ts). */
export interface Dependencies {
  store: OrderStore;
  bus: MessageBus;
  clock: Clock;
  policy: Policy;
  workflow: Workflow;
}
