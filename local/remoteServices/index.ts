export { startRemoteService, startRemoteServices } from './server.js';
export type {
  RemoteServiceOptions,
  RemoteServicesOptions,
  RunningRemoteService,
  RunningRemoteServices,
} from './server.js';
export type {
  LedgerSnapshot,
  EffectRecord,
  CompensationRecord,
  RefusalRecord,
  RequestLogEntry,
} from './ledger.js';
export { faultSku, parseFaultSku, FaultGrammarError } from './faultGrammar.js';
export type { FaultKind, RequestedFault } from './faultGrammar.js';
export { faultSettingsFromEnv, faultSettingsSchema } from './schemas.js';
export type { FaultSettings } from './schemas.js';
