import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of Azurite's table endpoint that can let a request reach the server and
 * then drop the server's answer: the write commits, but the client sees its connection reset and
 * never learns the outcome. That is the "committed on the server, timed out on the client" case
 * of a real network.
 *
 * It reads just enough HTTP to recognise requests: the Azure SDK sends one request at a time per
 * connection, so after a request line the next bytes from the server are that request's response.
 */
export interface DropRule {
  /** Which requests are candidates, e.g. entity-group transactions: /\$batch/. */
  match: RegExp;
  /** Drop the answer of every n-th matching request (1 = all). */
  every: number;
}

export interface TcpProxy {
  port: number;
  /** Answers dropped so far (their requests reached the server). */
  dropped(): number;
  /** Matching requests seen so far. */
  matched(): number;
  setRule(rule: DropRule | undefined): void;
  close(): Promise<void>;
}

const requestLine = /(?:^|\r\n)(GET|POST|PUT|PATCH|MERGE|DELETE|HEAD|OPTIONS) (\S+) HTTP\/1\.[01]\r\n/g;

export async function startTcpProxy(
  target: { host: string; port: number },
  rule?: DropRule,
): Promise<TcpProxy> {
  let current = rule;
  let matched = 0;
  let dropped = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    let dropNextResponse = false;
    client.on('data', (chunk: Buffer) => {
      for (const m of chunk.toString('latin1').matchAll(requestLine)) {
        if (current && current.match.test(`${m[1]} ${m[2]}`)) {
          matched += 1;
          if (matched % current.every === 0) dropNextResponse = true;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (dropNextResponse) {
        // The server has answered, so the write is committed: cut the client off without it.
        dropped += 1;
        dropNextResponse = false;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    const end = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    dropped: () => dropped,
    matched: () => matched,
    setRule: (next) => {
      current = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
