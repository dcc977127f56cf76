/**
 * The AMQP 1.0 listener: SASL (ANONYMOUS and PLAIN), the CBS put-token handshake, send links,
 * peek-lock and receive-and-delete receive links with credit and drain, link settlement, and
 * routing of $management requests. Everything entity-specific lives in Namespace.
 */
import type { AddressInfo, Server } from 'node:net';
import {
  create_container,
  message as rheaMessage,
  type Connection,
  type Delivery,
  type EventContext,
  type Message,
  type Receiver,
  type Sender,
} from 'rhea';
import { isTyped, keepWireTypes, typedMapField } from './wireTypes.js';
import { handleManagement } from './management.js';
import { SettleError, type MessageStore } from './message-store.js';
import { EntityError, type Namespace } from './namespace.js';
import {
  encodedSizeOver,
  lockTokenToDeliveryTag,
  MAX_MESSAGE_SIZE,
  splitBatch,
  toDeliveryMessage,
  wrapInt,
  wrapSymbol,
} from './wire.js';

type Outcomes = {
  accepted(): { described(): unknown };
  rejected(v: { error: { condition: string; description: string } }): { described(): unknown };
  modified(v: Record<string, unknown>): { described(): unknown };
  released(): { described(): unknown };
};
const outcomes = rheaMessage as unknown as Outcomes;

const BATCH_FORMAT = 0x80013700;

interface ReceiveBinding {
  sender: Sender;
  store: MessageStore;
  mode: 'peekLock' | 'receiveAndDelete';
  /** Transfers we queued on this link; compared with the credit limit the peer granted. */
  sent: number;
  /** A pump is scheduled for when our attach has been written (see creditOf). */
  awaitingAttach?: boolean;
  connection: ConnectionState;
}

interface ConnectionState {
  id: number;
  connection: Connection;
  /** Reply links ($cbs and $management receivers on the client side), by link name and by target address. */
  replyLinks: Map<string, Sender>;
  bindings: Set<ReceiveBinding>;
}

interface DeliveryInfo {
  store: MessageStore;
  token: string;
}

export interface ServerOptions {
  port: number;
  host: string;
  log: (line: string) => void;
  /** Fault injection: refuse this send with `com.microsoft:server-busy` (Service Bus throttling). */
  refuseSend?: (entity: string, messageId: string | undefined) => boolean;
}

export class AmqpServer {
  private readonly container = create_container({
    id: 'servicebus-emulator',
    // Settlement is decided by the broker logic below, never automatically.
    autoaccept: false,
    treat_modified_as_released: false,
  } as Record<string, unknown>);
  private server?: Server;
  private readonly connections = new Map<Connection, ConnectionState>();
  private readonly bindingsByStore = new Map<MessageStore, Set<ReceiveBinding>>();
  private readonly deliveries = new WeakMap<Delivery, DeliveryInfo>();
  private readonly rotation = new Map<MessageStore, number>();
  private nextConnectionId = 1;

  constructor(
    private readonly ns: Namespace,
    private readonly options: ServerOptions,
  ) {
    for (const e of ns.allReceivables()) {
      for (const store of [e.active, e.deadLetter]) store.onAvailable = () => this.pump(store);
    }
    const mechanisms = this.container.sasl_server_mechanisms as unknown as {
      enable_anonymous(): void;
      enable_plain(check: (user: string, pass: string) => boolean): void;
    };
    mechanisms.enable_anonymous();
    // Any key is accepted: the emulator is for local development, like Microsoft's.
    mechanisms.enable_plain(() => true);
    // Microsoft's .NET client (the Functions host's) offers only MSSBCBS: sign in without
    // credentials and authorize through the CBS put-token that follows, as Service Bus does.
    (mechanisms as unknown as Record<string, () => unknown>).MSSBCBS = () => new CbsSignIn();
    this.wire();
  }

  async listen(): Promise<number> {
    const server = this.container.listen({
      port: this.options.port,
      host: this.options.host,
    }) as unknown as Server;
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('listening', () => resolve());
      server.once('error', reject);
    });
    return (server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const state of this.connections.values()) {
      try {
        state.connection.close();
      } catch {
        // the socket may already be gone
      }
    }
    const server = this.server;
    if (server) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Connections that do not answer the close within a moment are cut.
        setTimeout(() => {
          for (const state of this.connections.values()) {
            (state.connection as unknown as { socket?: { destroy(): void } }).socket?.destroy();
          }
        }, 500).unref();
      });
    }
    this.connections.clear();
  }

  connectionCount(): number {
    return this.connections.size;
  }

  private state(connection: Connection): ConnectionState {
    let s = this.connections.get(connection);
    if (!s) {
      s = { id: this.nextConnectionId++, connection, replyLinks: new Map(), bindings: new Set() };
      this.connections.set(connection, s);
    }
    return s;
  }

  private wire(): void {
    const c = this.container;
    c.on('connection_open', (ctx: EventContext) => {
      const s = this.state(ctx.connection);
      this.options.log(`connection ${s.id} opened`);
    });
    c.on('connection_close', (ctx: EventContext) => this.dropConnection(ctx.connection, 'closed'));
    c.on('disconnected', (ctx: EventContext) => this.dropConnection(ctx.connection, 'disconnected'));
    c.on('connection_error', (ctx: EventContext) => {
      this.options.log(`connection error: ${JSON.stringify(ctx.connection.error ?? '')}`);
    });
    c.on('error', (err: unknown) => this.options.log(`amqp error: ${String(err)}`));
    c.on('sender_open', (ctx: EventContext) => this.onSenderOpen(ctx));
    c.on('receiver_open', (ctx: EventContext) => this.onReceiverOpen(ctx));
    c.on('sender_close', (ctx: EventContext) => {
      const sender = ctx.sender!;
      const unsettled = this.bindingsForSender(sender)?.sent ?? 0;
      this.options.log(
        `receive link '${sender.name}' closed by the client (${unsettled} sent on it)${sender.error ? `: ${JSON.stringify(sender.error)}` : ''}`,
      );
      this.dropSender(sender);
    });
    c.on('sender_error', () => {});
    c.on('receiver_error', () => {});
    c.on('session_error', () => {});
    c.on('message', (ctx: EventContext) => this.onMessage(ctx));
    // rhea follows every flow with drain set by 'sender_draining' too: one handler sees both.
    c.on('sender_flow', (ctx: EventContext) => this.onFlow(ctx.sender!));
    for (const event of ['accepted', 'rejected', 'modified', 'released']) {
      c.on(event, (ctx: EventContext) => this.onOutcome(event, ctx));
    }
  }

  private dropConnection(connection: Connection, why: string): void {
    const s = this.connections.get(connection);
    if (!s) return;
    this.connections.delete(connection);
    for (const b of s.bindings) this.unbind(b);
    // Locks held through this connection stay until they expire, as in Azure.
    this.options.log(`connection ${s.id} ${why}`);
  }

  private dropSender(sender: Sender): void {
    const s = this.connections.get(sender.connection);
    if (!s) return;
    for (const b of s.bindings) if (b.sender === sender) this.unbind(b);
    for (const [key, link] of s.replyLinks) if (link === sender) s.replyLinks.delete(key);
  }

  private unbind(b: ReceiveBinding): void {
    b.connection.bindings.delete(b);
    this.bindingsByStore.get(b.store)?.delete(b);
  }

  private refuse(link: Sender | Receiver, condition: string, description: string): void {
    this.options.log(`refused link '${link.name}': ${condition} ${description}`);
    link.close({ condition, description });
  }

  /** The peer's receiver: a $cbs or $management reply link, or a receive link on a queue, subscription or DLQ. */
  private onSenderOpen(ctx: EventContext): void {
    const sender = ctx.sender!;
    const s = this.state(ctx.connection);
    const remote = (sender as unknown as { remote: { attach: Record<string, unknown> } }).remote.attach;
    const source = (remote.source ?? {}) as { address?: string; filter?: Record<string, unknown> };
    const target = (remote.target ?? {}) as { address?: string };
    const local = (sender as unknown as { local: { attach: Record<string, unknown> } }).local.attach;
    local.source = remote.source;
    local.target = remote.target;
    local.snd_settle_mode = remote.snd_settle_mode;
    local.rcv_settle_mode = remote.rcv_settle_mode;
    const address = source.address ?? '';
    if (address === '$cbs' || /\/?\$management$/i.test(address)) {
      s.replyLinks.set(sender.name, sender);
      if (target.address) s.replyLinks.set(target.address, sender);
      return;
    }
    if (source.filter && Object.keys(source.filter).some((k) => k.includes('session-filter'))) {
      this.refuse(
        sender,
        'amqp:not-implemented',
        `Session receivers are not supported by this Service Bus emulator (entity '${address}').`,
      );
      return;
    }
    let store: MessageStore;
    try {
      store = this.ns.resolveStore(address, hostOf(ctx.connection)).store;
    } catch (err) {
      const e = err as EntityError;
      this.refuse(sender, e.condition ?? 'amqp:internal-error', e.message);
      return;
    }
    const binding: ReceiveBinding = {
      sender,
      store,
      mode: remote.snd_settle_mode === 1 ? 'receiveAndDelete' : 'peekLock',
      sent: 0,
      connection: s,
    };
    s.bindings.add(binding);
    let set = this.bindingsByStore.get(store);
    if (!set) this.bindingsByStore.set(store, (set = new Set()));
    set.add(binding);
  }

  /** The peer's sender: messages to a queue or topic, or requests to $cbs / $management. */
  private onReceiverOpen(ctx: EventContext): void {
    const receiver = ctx.receiver!;
    const remote = (receiver as unknown as { remote: { attach: Record<string, unknown> } }).remote.attach;
    const target = (remote.target ?? {}) as { address?: string };
    const local = (receiver as unknown as { local: { attach: Record<string, unknown> } }).local.attach;
    local.source = remote.source;
    local.target = remote.target;
    local.snd_settle_mode = remote.snd_settle_mode;
    local.rcv_settle_mode = 0;
    // The SDK sizes message batches from this (Standard tier: 256 KB).
    local.max_message_size = MAX_MESSAGE_SIZE;
    const address = target.address ?? '';
    if (address === '$cbs') return;
    const mgmt = /^(.*)\/\$management$/i.exec(address);
    const entity = mgmt ? mgmt[1] : address;
    if (!this.ns.knows(entity)) {
      const e = this.ns.notFound(entity, hostOf(ctx.connection));
      this.refuse(receiver, e.condition, e.message);
      return;
    }
    if (!mgmt && !this.ns.hasSendTarget(address)) {
      this.refuse(
        receiver,
        'amqp:not-allowed',
        `Cannot send to '${address}': only queues and topics accept messages.`,
      );
    }
  }

  private onMessage(ctx: EventContext): void {
    const receiver = ctx.receiver!;
    const delivery = ctx.delivery!;
    const address = (receiver.target as { address?: string } | undefined)?.address ?? '';
    const request = ctx.message as Message;
    if (address === '$cbs') {
      delivery.accept();
      this.replyOn(ctx.connection, request, {
        correlation_id: request.message_id,
        to: request.reply_to,
        application_properties: { 'status-code': wrapInt(200), 'status-description': 'OK' },
        body: undefined,
      });
      return;
    }
    const mgmt = /^(.*)\/\$management$/i.exec(address);
    if (mgmt) {
      delivery.accept();
      const response = handleManagement(this.ns, mgmt[1], request);
      // Schedule, cancel and update-disposition answer only once their change is durable.
      this.ns.afterDurable((err) =>
        this.replyOn(ctx.connection, request, err ? managementFailure(request, err) : response),
      );
      return;
    }
    try {
      const format = (delivery as unknown as { format?: number }).format ?? 0;
      const raw = ctx.message as unknown as Buffer;
      const size =
        format === BATCH_FORMAT
          ? raw.length > MAX_MESSAGE_SIZE
            ? raw.length
            : undefined
          : encodedSizeOver(ctx.message as Message, MAX_MESSAGE_SIZE);
      if (size !== undefined) {
        delivery.reject({
          condition: 'amqp:link:message-size-exceeded',
          description: `The received message (size: ${size} bytes) exceeds the limit (${MAX_MESSAGE_SIZE} bytes) currently allowed on the link. Reference: ${address}`,
        });
        return;
      }
      const messages =
        format === BATCH_FORMAT
          ? splitBatch(ctx.message as unknown as Buffer)
          : [keepWireTypes(ctx.message as Message)];
      const id = messages[0]?.message_id;
      if (this.options.refuseSend?.(address, id === undefined ? undefined : String(id))) {
        delivery.reject({ condition: 'com.microsoft:server-busy', description: 'The server is busy.' });
        return;
      }
      for (const m of messages) this.ns.validateSend(address, m);
      const now = Date.now();
      for (const m of messages) this.ns.send(address, m, now);
      // An acknowledged send is never lost: with persistence the accept waits for the fsync.
      this.ns.afterDurable((err) => {
        if (err) delivery.reject({ condition: 'amqp:internal-error', description: err.message });
        else delivery.accept();
      });
    } catch (err) {
      const condition = err instanceof EntityError ? err.condition : 'amqp:internal-error';
      delivery.reject({ condition, description: (err as Error).message });
    }
  }

  private replyOn(connection: Connection, request: Message, response: Message): void {
    const s = this.state(connection);
    const link = request.reply_to ? s.replyLinks.get(String(request.reply_to)) : undefined;
    if (!link) {
      this.options.log(`no reply link '${String(request.reply_to)}' on connection ${s.id}; response dropped`);
      return;
    }
    link.send(response);
  }

  private onFlow(sender: Sender): void {
    const set = this.bindingsForSender(sender);
    if (!set) return;
    this.pump(set.store);
    const raw = sender as unknown as { _draining?: boolean; credit: number; delivery_count: number };
    if (raw._draining) {
      // Whatever credit is left is consumed by the drain: no message is available for it.
      set.sent = Math.max(raw.credit, 0) + raw.delivery_count;
      answerDrain(sender);
    }
  }

  private bindingsForSender(sender: Sender): ReceiveBinding | undefined {
    const s = this.connections.get(sender.connection);
    if (!s) return undefined;
    for (const b of s.bindings) if (b.sender === sender) return b;
    return undefined;
  }

  private creditOf(b: ReceiveBinding): number {
    const raw = b.sender as unknown as {
      credit: number;
      delivery_count: number;
      session: { outgoing: { available(): number } };
      state: { open_requests: number };
    };
    if (!b.sender.is_open()) return 0;
    if (raw.state.open_requests > 0) {
      // Our attach is not written yet, and rhea writes a session's transfers before its links'
      // attaches: a client that sent its attach and flow together (the .NET client with a
      // prefetch count) would see transfers on a link not yet attached and abort it, leaving
      // the messages locked. Deliver once the attach is out.
      if (!b.awaitingAttach) {
        b.awaitingAttach = true;
        setImmediate(() => {
          b.awaitingAttach = false;
          this.pump(b.store);
        });
      }
      return 0;
    }
    const credit = raw.credit + raw.delivery_count - b.sent;
    return Math.min(credit, raw.session.outgoing.available());
  }

  /** Hands available messages to receive links with credit, rotating between links. */
  private pump(store: MessageStore): void {
    const set = this.bindingsByStore.get(store);
    if (!set || set.size === 0 || !store.hasAvailable()) return;
    const bindings = [...set];
    let index = (this.rotation.get(store) ?? 0) % bindings.length;
    let idle = 0;
    while (store.hasAvailable() && idle < bindings.length) {
      const b = bindings[index];
      index = (index + 1) % bindings.length;
      if (this.creditOf(b) <= 0) {
        idle++;
        continue;
      }
      idle = 0;
      const msg = store.take(b.mode);
      if (!msg) break;
      const body = toDeliveryMessage(msg, store);
      const tag = msg.lock ? lockTokenToDeliveryTag(msg.lock.token) : Buffer.from(String(msg.seq));
      const delivery = b.sender.send(body, tag);
      b.sent++;
      if (msg.lock) this.deliveries.set(delivery, { store, token: msg.lock.token });
    }
    this.rotation.set(store, index);
  }

  private onOutcome(event: string, ctx: EventContext): void {
    const delivery = ctx.delivery!;
    const info = this.deliveries.get(delivery);
    if (!info) {
      if (!delivery.settled) settleFinally(delivery);
      return;
    }
    this.deliveries.delete(delivery);
    const state = (delivery as unknown as { remote_state?: Record<string, unknown> }).remote_state ?? {};
    let settledState: unknown;
    try {
      switch (event) {
        case 'accepted':
          info.store.complete(info.token);
          settledState = outcomes.accepted().described();
          break;
        case 'rejected': {
          const error = (state.error ?? {}) as {
            condition?: string;
            description?: string;
            info?: Record<string, unknown>;
          };
          // The info map as typed by the client: rejected = [error], error = [condition, description, info].
          const rawError = rawField(delivery, 0);
          const deadLetterInfo = typedMapField(
            error.info,
            isTyped(rawError) ? (rawError.value as unknown[])[2] : undefined,
          );
          const { DeadLetterReason, DeadLetterErrorDescription, ...properties } = deadLetterInfo ?? {};
          info.store.deadLetter(info.token, {
            reason: DeadLetterReason === null ? undefined : (DeadLetterReason as string | undefined),
            description:
              DeadLetterErrorDescription === null
                ? undefined
                : (DeadLetterErrorDescription as string | undefined),
            // The SDK sends the caller's extra properties alongside the reason, as on $management.
            properties,
          });
          // Echo the outcome without an error: the SDK treats any error on the settled state as a failure.
          settledState = outcomes.rejected({} as never).described();
          break;
        }
        case 'modified': {
          // modified = [delivery-failed, undeliverable-here, message-annotations]
          const annotations = typedMapField(
            state.message_annotations as Record<string, unknown> | undefined,
            rawField(delivery, 2),
          );
          if (state.undeliverable_here === true) info.store.defer(info.token, annotations);
          else info.store.abandon(info.token, annotations);
          settledState = outcomes
            .modified({ undeliverable_here: state.undeliverable_here === true })
            .described();
          break;
        }
        default:
          info.store.release(info.token);
          settledState = outcomes.released().described();
      }
    } catch (err) {
      const condition = err instanceof SettleError ? err.condition : 'amqp:internal-error';
      settledState = outcomes
        .rejected({ error: { condition, description: (err as Error).message } })
        .described();
    }
    this.ns.afterDurable((err) => {
      if (err) {
        settledState = outcomes
          .rejected({ error: { condition: 'amqp:internal-error', description: err.message } })
          .described();
      }
      settleFinally(delivery, settledState);
    });
  }
}

/** Field `index` of the peer's outcome as it came off the wire (rhea keeps it in `value`). */
function rawField(delivery: Delivery, index: number): unknown {
  const state = (delivery as unknown as { remote_state?: { value?: unknown[] } }).remote_state;
  return Array.isArray(state?.value) ? state.value[index] : undefined;
}

/** rhea's server mechanism contract: `start` decides the outcome at once, with no challenge. */
class CbsSignIn {
  outcome?: boolean;
  username?: string;
  start(): void {
    this.outcome = true;
    this.username = 'cbs';
  }
}

/**
 * Settles a delivery on our side and lets rhea forget it. The SDK receives with
 * rcv-settle-mode "second": its unsettled disposition is its last word, and it never sends a
 * settled one after ours. rhea frees a session slot only when both sides settled, so without
 * this every receive link stopped after 2,048 deliveries (rhea's session window).
 */
function settleFinally(delivery: Delivery, state?: unknown): void {
  delivery.update(true, state);
  (delivery as unknown as { remote_settled: boolean }).remote_settled = true;
}

/** The host name the client connected to, as its AMQP open frame names it. */
function hostOf(connection: Connection): string | undefined {
  const open = (connection as unknown as { remote?: { open?: { hostname?: unknown } } }).remote?.open;
  return typeof open?.hostname === 'string' && open.hostname !== '' ? open.hostname : undefined;
}

/**
 * Answers a drain. rhea echoes it (consuming the credit left) only when some credit is left; when
 * transfers already in flight used it all, the peer still waits for the echo, and the SDK closes
 * its link after 200 ms without one. Then the flow is written here, with rhea's own writer.
 */
function answerDrain(sender: Sender): void {
  const raw = sender as unknown as {
    credit: number;
    session: { _write_flow(link: unknown): void };
  };
  if (raw.credit > 0) {
    sender.set_drained(true);
    return;
  }
  raw.credit = 0;
  const own = sender as unknown as Record<string, unknown>;
  own._get_drain = () => true;
  try {
    raw.session._write_flow(sender);
  } finally {
    delete own._get_drain;
  }
}

function managementFailure(request: Message, err: Error): Message {
  const props = {
    statusCode: wrapInt(500),
    'status-code': wrapInt(500),
    statusDescription: err.message,
    'status-description': err.message,
    errorCondition: wrapSymbol('amqp:internal-error'),
    'error-condition': wrapSymbol('amqp:internal-error'),
  };
  return {
    correlation_id: request.message_id,
    to: request.reply_to,
    application_properties: props,
    body: undefined,
  };
}
