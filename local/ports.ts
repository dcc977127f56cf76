import { createServer } from 'node:net';

export class PortBusyError extends Error {
  constructor(
    public readonly port: number,
    public readonly what: string,
    public readonly flag: string,
  ) {
    super(
      `port ${port} for ${what} is already in use; stop whatever holds it, or choose another port with ${flag}`,
    );
    this.name = 'PortBusyError';
  }
}

/** Fails with a clear error when a fixed port is taken (port 0 always passes). */
export async function assertPortFree(
  port: number,
  what: string,
  flag: string,
  host = '127.0.0.1',
): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const server = createServer();
    server.once('error', (e: NodeJS.ErrnoException) =>
      reject(e.code === 'EADDRINUSE' || e.code === 'EACCES' ? new PortBusyError(port, what, flag) : e),
    );
    server.listen(port, host, () => server.close(() => resolve()));
  });
}
