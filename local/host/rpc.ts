/**
 * The slice of the worker protocol (`@azure/functions-core`) that the `@azure/functions` library
 * talks to. The real Node worker provides that module; the local host provides its own, so these
 * shapes mirror the library's expectations, not the gRPC messages themselves.
 */

export type RpcLogLevel = 'trace' | 'debug' | 'information' | 'warning' | 'error' | 'critical' | 'none';
export type RpcLogCategory = 'user' | 'system' | 'customMetric';

export interface RpcTypedData {
  string?: string | null;
  json?: string | null;
  bytes?: Uint8Array | null;
  stream?: Uint8Array | null;
  http?: RpcHttpData | null;
  int?: number | null;
  double?: number | null;
  /** The host's typed collections (TypedDataCollection), e.g. a batch's bodies and metadata arrays. */
  collectionString?: { string: string[] } | null;
  collectionBytes?: { bytes: Uint8Array[] } | null;
  collectionSint64?: { sint64: number[] } | null;
}

export interface RpcNullable<T> {
  value?: T | null;
}

export interface RpcHttpCookie {
  name?: string | null;
  value?: string | null;
  domain?: RpcNullable<string> | null;
  path?: RpcNullable<string> | null;
  expires?: RpcNullable<{ seconds?: number | null }> | null;
  secure?: RpcNullable<boolean> | null;
  httpOnly?: RpcNullable<boolean> | null;
  sameSite?: 'none' | 'lax' | 'strict' | 'explicitNone' | null;
  maxAge?: RpcNullable<number> | null;
}

export interface RpcHttpData {
  method?: string | null;
  url?: string | null;
  headers?: Record<string, string> | null;
  body?: RpcTypedData | null;
  params?: Record<string, string> | null;
  query?: Record<string, string> | null;
  statusCode?: string | null;
  cookies?: RpcHttpCookie[] | null;
  enableContentNegotiation?: boolean | null;
}

export interface RpcBindingInfo {
  type?: string | null;
  direction?: 'in' | 'out' | 'inout' | null;
  dataType?: string | null;
  [property: string]: unknown;
}

export interface FunctionMetadata {
  name: string;
  bindings: Record<string, RpcBindingInfo>;
  retryOptions?: unknown;
}

export interface RpcParameterBinding {
  name?: string | null;
  data?: RpcTypedData | null;
}

export interface RpcInvocationRequest {
  invocationId?: string | null;
  functionId?: string | null;
  inputData?: RpcParameterBinding[] | null;
  triggerMetadata?: Record<string, RpcTypedData> | null;
  traceContext?: unknown;
  retryContext?: unknown;
}

export interface RpcInvocationResponse {
  invocationId?: string | null;
  outputData?: RpcParameterBinding[] | null;
  returnValue?: RpcTypedData | null;
}

export type InvocationState = 'preInvocationHooks' | 'postInvocationHooks' | 'invocation' | undefined;

export interface CoreInvocationContext {
  invocationId: string;
  request: RpcInvocationRequest;
  metadata: FunctionMetadata;
  state?: InvocationState;
  log(level: RpcLogLevel, category: RpcLogCategory, message: string): void;
}

export interface InvocationArguments {
  context: unknown;
  inputs: unknown[];
}

export interface InvocationModel {
  getArguments(): Promise<InvocationArguments>;
  invokeFunction(context: unknown, inputs: unknown[], callback: FunctionCallback): Promise<unknown>;
  getResponse(context: unknown, result: unknown): Promise<RpcInvocationResponse>;
}

export interface ProgrammingModel {
  name: string;
  version: string;
  getInvocationModel(coreCtx: CoreInvocationContext): InvocationModel;
  getCapabilities?(capabilities: Record<string, string>): Promise<Record<string, string>>;
}

export type FunctionCallback = (...args: unknown[]) => unknown;
export type HookCallback = (context: Record<string, unknown>) => unknown;

export interface Disposable {
  dispose(): void;
}
