import { createRequire } from 'node:module';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { Counts } from './stats.js';

/** rhea's frame decoder (a devDependency, untyped): only attach and transfer are read. */
interface DecodedFrame {
  channel: number;
  performative?: { name?: string; handle?: number; role?: boolean; source?: Terminus; target?: Terminus };
}
type Terminus = { value?: unknown } | null | undefined;
const rheaFrames = createRequire(__filename)('rhea/lib/frames.js') as {
  read_frame(buffer: Buffer): DecodedFrame | null;
};

/** The address of a source or target terminus (its first field). */
function addressOf(t: Terminus): string | undefined {
  const fields = t?.value;
  if (!Array.isArray(fields) || fields.length === 0) return undefined;
  const first = fields[0] as unknown;
  const v =
    typeof first === 'object' && first !== null && 'value' in first
      ? (first as { value: unknown }).value
      : first;
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

/**
 * A counting TCP proxy in front of the Service Bus emulator. It splits the byte stream into
 * AMQP frames and counts performatives per direction (`out.` = client to broker, `in.` = broker
 * to client), so idle behaviour (flows, keep-alive empty frames, token refreshes) is measured on
 * the wire, whatever the SDK does internally. Per-entity message counts come from the emulator.
 */
const performatives: Record<number, string> = {
  0x10: 'open',
  0x11: 'begin',
  0x12: 'attach',
  0x13: 'flow',
  0x14: 'transfer',
  0x15: 'disposition',
  0x16: 'detach',
  0x17: 'end',
  0x18: 'close',
  0x40: 'sasl-mechanisms',
  0x41: 'sasl-init',
  0x42: 'sasl-challenge',
  0x43: 'sasl-response',
  0x44: 'sasl-outcome',
};

/** Incremental frame splitter for one direction of one connection (pure; unit-tested). */
export class AmqpFrameCounter {
  private pending: Buffer = Buffer.alloc(0);
  /** `${channel}:${handle}` -> the entity the link's transfers go to or come from. */
  private readonly links = new Map<string, string>();

  /**
   * `side` says who writes this stream: its attach frames name this side's handles, and the
   * entity is the target of a client's sender and the source of a client's receiver (the
   * broker's attach says the same from its side, with the roles swapped).
   */
  constructor(
    private readonly counts: Counts,
    private readonly prefix: string,
    private readonly side: 'client' | 'broker' = prefix.startsWith('in') ? 'broker' : 'client',
    /**
     * Link name -> entity, shared by the two directions of a connection: the broker's attach
     * names the link as the client did, and its own termini are not always readable (the
     * emulator echoes the client's terminus object, which does not decode as one).
     */
    private readonly linkNames: Map<string, string> = new Map(),
  ) {}

  push(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    for (;;) {
      if (this.pending.length >= 4 && this.pending.toString('latin1', 0, 4) === 'AMQP') {
        if (this.pending.length < 8) return;
        this.bump('header');
        this.pending = this.pending.subarray(8);
        continue;
      }
      if (this.pending.length < 8) return;
      const size = this.pending.readUInt32BE(0);
      if (size < 8) {
        // Not AMQP framing: stop parsing this stream rather than guess.
        this.bump('unparsed');
        this.pending = Buffer.alloc(0);
        return;
      }
      if (this.pending.length < size) return;
      const frame = this.pending.subarray(0, size);
      this.pending = this.pending.subarray(size);
      this.count(frame);
    }
  }

  private count(frame: Buffer): void {
    const doff = frame[4] * 4;
    if (frame.length <= doff) {
      this.bump('empty');
      return;
    }
    const body = frame.subarray(doff);
    let code = -1;
    if (body[0] === 0x00 && body[1] === 0x53) code = body[2];
    else if (body[0] === 0x00 && body[1] === 0x80 && body.length >= 10)
      code = Number(body.readBigUInt64BE(2));
    const name = performatives[code] ?? 'other';
    this.bump(name);
    if (name === 'attach') this.rememberLink(frame);
    // Premium's published throughput guidance is in bytes: count what message transfers carry.
    if (name === 'transfer') {
      this.bump('transferBytes', frame.length);
      const entity = this.linkOf(frame);
      if (entity) this.bump(`bytes.${entity}`, frame.length);
    }
  }

  private decode(frame: Buffer): DecodedFrame | null {
    try {
      return rheaFrames.read_frame(frame);
    } catch {
      this.bump('undecoded');
      return null;
    }
  }

  private rememberLink(frame: Buffer): void {
    const f = this.decode(frame);
    const p = f?.performative;
    if (!f || !p || p.handle === undefined) return;
    // role true = receiver. A client's receiver reads its source; a broker's receiver, its target.
    const receiver = p.role === true;
    const own = addressOf((this.side === 'client') === receiver ? p.source : p.target);
    const entity = (p.name !== undefined ? this.linkNames.get(p.name) : undefined) ?? own;
    if (!entity) return;
    if (p.name !== undefined && own) this.linkNames.set(p.name, own);
    this.links.set(`${f.channel}:${p.handle}`, entity);
  }

  private linkOf(frame: Buffer): string | undefined {
    const f = this.decode(frame);
    const handle = f?.performative?.handle;
    return f && handle !== undefined ? this.links.get(`${f.channel}:${handle}`) : undefined;
  }

  private bump(name: string, by = 1): void {
    const key = `${this.prefix}${name}`;
    this.counts[key] = (this.counts[key] ?? 0) + by;
  }
}

export interface AmqpProxy {
  port: number;
  setUpstream(port: number, host?: string): void;
  snapshot(): Counts;
  close(): Promise<void>;
}

export async function startAmqpProxy(): Promise<AmqpProxy> {
  const counts: Counts = {};
  let upstream: { host: string; port: number } | undefined;
  let ready!: () => void;
  const upstreamSet = new Promise<void>((resolve) => (ready = resolve));
  const sockets = new Set<Socket>();

  const server: Server = createServer((client) => {
    sockets.add(client);
    client.pause();
    counts.connections = (counts.connections ?? 0) + 1;
    void upstreamSet.then(() => {
      const broker = connect(upstream!.port, upstream!.host);
      sockets.add(broker);
      const linkNames = new Map<string, string>();
      const outbound = new AmqpFrameCounter(counts, 'out.', 'client', linkNames);
      const inbound = new AmqpFrameCounter(counts, 'in.', 'broker', linkNames);
      client.on('data', (d: Buffer) => {
        outbound.push(d);
        broker.write(d);
      });
      broker.on('data', (d: Buffer) => {
        inbound.push(d);
        client.write(d);
      });
      const end = () => {
        client.destroy();
        broker.destroy();
        sockets.delete(client);
        sockets.delete(broker);
      };
      client.on('close', end).on('error', end);
      broker.on('close', end).on('error', end);
      client.resume();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    setUpstream(port: number, host = '127.0.0.1') {
      upstream = { host, port };
      ready();
    },
    snapshot: () => ({ ...counts }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
