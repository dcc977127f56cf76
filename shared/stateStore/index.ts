export * from './clients.js';
export * from './errors.js';
export * from './historyRows.js';
export * from './inFlightIndex.js';
export * from './metrics.js';
export { orderRowKey, stateRowKey, stepRowKey } from './rows.js';
export * from './stateIndex.js';
export * from './stateStore.js';
