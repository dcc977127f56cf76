/**
 * In-process entry point of the Service Bus emulator: an AMQP 1.0 broker that the real
 * @azure/service-bus SDK talks to with the official emulator's connection string.
 */
import { loadConfig } from './config.js';
import { Namespace, type EntityCounters } from './namespace.js';
import { AmqpServer } from './server.js';

export { ConfigError, loadConfig, parseIsoDuration } from './config.js';
export type { NamespaceConfig } from './config.js';
export type { EntityCounters } from './namespace.js';

export interface ServiceBusEmulatorOptions {
  /** Path to a Config.json in the official emulator's format, or the parsed document. */
  config: string | object;
  /** TCP port; 0 picks a free one. Default 5672. */
  port?: number;
  /** Interface to bind. Default 127.0.0.1. */
  host?: string;
  /**
   * Directory where messages survive restarts (file `servicebus.log`, see README). Without it
   * everything is in memory.
   */
  dataDir?: string;
  /** With dataDir: appended records after which the log is compacted (default 10 000). */
  compactAfterRecords?: number;
  log?: (line: string) => void;
  /** Fault injection for tests: refuse a send as throttled (`com.microsoft:server-busy`). */
  refuseSend?: (entity: string, messageId: string | undefined) => boolean;
}

export interface ServiceBusEmulator {
  port: number;
  connectionString: string;
  stop(): Promise<void>;
  /** Per-entity counters (for tests and diagnostics; the conformance suite does not use them). */
  counters(): {
    entities: EntityCounters[];
    senders: Array<{ path: string; sent: number; duplicates: number }>;
  };
}

export function connectionStringFor(host: string, port: number): string {
  const endpoint = port === 5672 ? `sb://${host}` : `sb://${host}:${port}`;
  return `Endpoint=${endpoint};SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;`;
}

export async function startServiceBusEmulator(
  options: ServiceBusEmulatorOptions,
): Promise<ServiceBusEmulator> {
  const config = loadConfig(options.config);
  const host = options.host ?? '127.0.0.1';
  const log = options.log ?? (() => {});
  const ns = new Namespace(config);
  let persistence: { close(): Promise<void> } | undefined;
  if (options.dataDir) {
    const { attachPersistence } = await import('./persistence.js');
    try {
      persistence = await attachPersistence(ns, options.dataDir, log, options.compactAfterRecords);
    } catch (err) {
      ns.close();
      throw err;
    }
  }
  const server = new AmqpServer(ns, {
    port: options.port ?? 5672,
    host,
    log,
    refuseSend: options.refuseSend,
  });
  let port: number;
  try {
    port = await server.listen();
  } catch (err) {
    ns.close();
    await persistence?.close();
    throw err;
  }
  log(`Service Bus emulator listening on ${host}:${port}`);
  let stopped: Promise<void> | undefined;
  return {
    port,
    connectionString: connectionStringFor(host, port),
    counters: () => ({ entities: ns.counters(), senders: ns.sendCounters() }),
    stop: () => {
      stopped ??= (async () => {
        await server.close();
        ns.close();
        await persistence?.close();
      })();
      return stopped;
    },
  };
}
