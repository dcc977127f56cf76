/**
 * Command line: node dist/emulators/servicebus/cli.js --config <file> [--port 5672] [--host 127.0.0.1] [--data <dir>] [--verbose]
 * Prints one line with the port and the connection string, and stops cleanly on SIGINT/SIGTERM.
 */
import { startServiceBusEmulator } from './index.js';

interface CliArgs {
  config: string;
  port: number;
  host: string;
  data?: string;
  verbose: boolean;
}

const usage =
  'usage: cli.js --config <Config.json> [--port <n>] [--host <address>] [--data <dir>] [--verbose]';

export function parseArgs(argv: string[]): CliArgs {
  const args: Partial<CliArgs> = { port: 5672, host: '127.0.0.1', verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined || v.startsWith('--')) throw new Error(`${flag} needs a value\n${usage}`);
      return v;
    };
    switch (flag) {
      case '--config':
        args.config = value();
        break;
      case '--port': {
        const p = Number(value());
        if (!Number.isInteger(p) || p < 0 || p > 65535) throw new Error(`--port must be 0-65535\n${usage}`);
        args.port = p;
        break;
      }
      case '--host':
        args.host = value();
        break;
      case '--data':
        args.data = value();
        break;
      case '--verbose':
        args.verbose = true;
        break;
      case '--help':
      case '-h':
        throw new Error(usage);
      default:
        throw new Error(`unknown argument ${flag}\n${usage}`);
    }
  }
  if (!args.config) throw new Error(`--config is required\n${usage}`);
  return args as CliArgs;
}

async function main(): Promise<void> {
  let args: CliArgs;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  const log = args.verbose
    ? (line: string) => process.stderr.write(`[servicebus-emulator] ${line}\n`)
    : undefined;
  const emulator = await startServiceBusEmulator({
    config: args.config,
    port: args.port,
    host: args.host,
    dataDir: args.data,
    log,
  });
  process.stdout.write(
    `Service Bus emulator listening on ${args.host}:${emulator.port} ConnectionString=${emulator.connectionString}\n`,
  );
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`[servicebus-emulator] ${signal}: stopping\n`);
    emulator.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`[servicebus-emulator] stop failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`[servicebus-emulator] ${(err as Error).message ?? String(err)}\n`);
    process.exit(1);
  });
}
