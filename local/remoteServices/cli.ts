import { parseArgs } from 'node:util';
import { remoteServiceNames, type RemoteServiceName } from '../../shared/agents/remoteOperations.js';
import { faultSettingsFromEnv } from './schemas.js';
import { startRemoteServices } from './server.js';

/**
 * Runs the demo remote service of each declared step's Agent:
 *   node dist/local/remoteServices/cli.js --inventory-port 7101 --payment-port 7102 --shipping-port 7103
 * (default: 7101, 7102, ... in step order)
 * Service-wide faults come from REMOTE_TRANSIENT_RATE, REMOTE_LATENCY_MS, REMOTE_LATENCY_JITTER_MS,
 * REMOTE_HANG_RATE and REMOTE_FAULT_SEED.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      ...Object.fromEntries(
        remoteServiceNames.map((name, i) => [
          `${name}-port`,
          { type: 'string' as const, default: String(7101 + i) },
        ]),
      ),
      quiet: { type: 'boolean', default: false },
    },
  });
  const ports: Partial<Record<RemoteServiceName, number>> = {};
  for (const name of remoteServiceNames) {
    const raw = (values as Record<string, unknown>)[`${name}-port`] as string;
    const port = Number(raw);
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      throw new Error(`--${name}-port must be a port number (0 = any free port), got "${raw}"`);
    }
    ports[name] = port;
  }
  const faults = faultSettingsFromEnv();
  const services = await startRemoteServices({
    ports,
    faults,
    log: values.quiet ? undefined : (line) => console.log(line),
  });
  for (const name of remoteServiceNames) console.log(`${name} ${services[name].url}`);
  if (Object.keys(faults).length > 0) console.log(`service-wide faults: ${JSON.stringify(faults)}`);
  const shutdown = () => {
    services.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
