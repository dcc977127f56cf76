/**
 * The `<entity>/$management` request/response operations the SDK uses: peek, renew-lock,
 * schedule and cancel, receive deferred by sequence number, and update-disposition (settlement
 * without the receive link). Replies carry `statusCode` (plus `status-code`) and an AMQP map body,
 * and errors carry the AMQP condition the SDK maps to its error codes.
 */
import type { Message } from 'rhea';
import { SettleError, type MessageStore } from './message-store.js';
import { EntityError, type Namespace } from './namespace.js';
import {
  decodeMessage,
  encodedSizeOver,
  encodeMessage,
  MAX_MESSAGE_SIZE,
  lockTokenFromWire,
  longFromWire,
  toDeliveryMessage,
  wrapInt,
  wrapSymbol,
  wrapLongArray,
  wrapTimestampArray,
  wrapUuid,
} from './wire.js';

class ManagementError extends Error {
  constructor(
    readonly status: number,
    readonly condition: string,
    message: string,
  ) {
    super(message);
  }
}

function badRequest(message: string): ManagementError {
  return new ManagementError(400, 'com.microsoft:argument-error', message);
}

function reply(
  request: Message,
  status: number,
  body: unknown,
  description = 'OK',
  condition?: string,
): Message {
  const props: Record<string, unknown> = {
    statusCode: wrapInt(status),
    'status-code': wrapInt(status),
    statusDescription: description,
    'status-description': description,
  };
  if (condition) {
    props.errorCondition = wrapSymbol(condition);
    props['error-condition'] = wrapSymbol(condition);
  }
  return {
    correlation_id: request.message_id,
    to: request.reply_to,
    application_properties: props,
    body,
  } as Message;
}

const statusForCondition: Record<string, number> = {
  'amqp:not-found': 404,
  'com.microsoft:message-not-found': 404,
  'com.microsoft:message-lock-lost': 410,
  'amqp:not-implemented': 501,
  'amqp:not-allowed': 400,
  'com.microsoft:argument-error': 400,
};

function numberList(value: unknown, name: string): number[] {
  if (!Array.isArray(value)) throw badRequest(`${name} must be an array`);
  try {
    return value.map(longFromWire);
  } catch (err) {
    throw badRequest(`${name}: ${(err as Error).message}`);
  }
}

function lockTokens(body: Record<string, unknown>): string[] {
  const raw = body['lock-tokens'];
  if (!Array.isArray(raw) || raw.length === 0) throw badRequest('lock-tokens must be a non-empty array');
  try {
    return raw.map(lockTokenFromWire);
  } catch (err) {
    throw badRequest((err as Error).message);
  }
}

/** Settlement outside the link looks for the lock in the addressed store, then in its sibling. */
function storeHoldingLock(stores: MessageStore[], token: string): MessageStore {
  return stores.find((s) => s.hasLock(token)) ?? stores[0];
}

const notImplemented = new Set([
  'com.microsoft:renew-session-lock',
  'com.microsoft:set-session-state',
  'com.microsoft:get-session-state',
  'com.microsoft:get-message-sessions',
  'com.microsoft:add-rule',
  'com.microsoft:remove-rule',
  'com.microsoft:enumerate-rules',
]);

export function handleManagement(ns: Namespace, entityAddress: string, request: Message): Message {
  const operation = String(request.application_properties?.operation ?? '');
  try {
    const body = (request.body ?? {}) as Record<string, unknown>;
    if (typeof body !== 'object') throw badRequest('the request body must be a map');
    if (notImplemented.has(operation)) {
      throw new ManagementError(
        501,
        'amqp:not-implemented',
        `The operation '${operation}' is not supported by this Service Bus emulator (sessions and rule management are not implemented).`,
      );
    }
    switch (operation) {
      case 'com.microsoft:peek-message': {
        const { store } = ns.resolveStore(entityAddress);
        const from = longFromWire(body['from-sequence-number'] ?? 1);
        const count = Number(body['message-count'] ?? 1);
        if (!Number.isInteger(count) || count < 1)
          throw badRequest('message-count must be a positive integer');
        if (body['session-id'] !== undefined) {
          throw new ManagementError(
            501,
            'amqp:not-implemented',
            'Peeking a session is not supported by this emulator.',
          );
        }
        const omitBody = body['omit-message-body'] === true;
        const found = store.peek(from, count);
        if (found.length === 0) return reply(request, 204, {}, 'No Content');
        return reply(request, 200, {
          messages: found.map((m) => ({ message: encodeMessage(toDeliveryMessage(m, store, omitBody)) })),
        });
      }
      case 'com.microsoft:renew-lock': {
        const { entity } = ns.resolveStore(entityAddress);
        const stores = [entity.active, entity.deadLetter];
        const expirations = lockTokens(body).map((t) => storeHoldingLock(stores, t).renew(t));
        return reply(request, 200, { expirations: wrapTimestampArray(expirations) });
      }
      case 'com.microsoft:schedule-message': {
        const entries = body.messages;
        if (!Array.isArray(entries)) throw badRequest('messages must be an array');
        const messages = entries.map((e: Record<string, unknown>) => {
          if (!e || !Buffer.isBuffer(e.message))
            throw badRequest('each scheduled entry needs an encoded message');
          return decodeMessage(e.message);
        });
        for (const m of messages) {
          if (m.message_annotations?.['x-opt-scheduled-enqueue-time'] === undefined) {
            throw badRequest('a scheduled message needs x-opt-scheduled-enqueue-time');
          }
          const size = encodedSizeOver(m, MAX_MESSAGE_SIZE);
          if (size !== undefined) {
            throw new ManagementError(
              413,
              'amqp:link:message-size-exceeded',
              `The scheduled message (size: ${size} bytes) exceeds the limit (${MAX_MESSAGE_SIZE} bytes) allowed for a message. Reference: ${entityAddress}`,
            );
          }
        }
        const seqs = ns.schedule(entityAddress, messages);
        return reply(request, 200, { 'sequence-numbers': wrapLongArray(seqs) });
      }
      case 'com.microsoft:cancel-scheduled-message': {
        ns.cancelScheduled(entityAddress, numberList(body['sequence-numbers'], 'sequence-numbers'));
        return reply(request, 200, {});
      }
      case 'com.microsoft:receive-by-sequence-number': {
        if (body['session-id'] !== undefined && body['session-id'] !== null) {
          throw new ManagementError(
            501,
            'amqp:not-implemented',
            'Sessions are not supported by this emulator.',
          );
        }
        const { store } = ns.resolveStore(entityAddress);
        const seqs = numberList(body['sequence-numbers'], 'sequence-numbers');
        const mode = Number(body['receiver-settle-mode'] ?? 1) === 0 ? 'receiveAndDelete' : 'peekLock';
        const found = store.receiveDeferred(seqs, mode);
        return reply(request, 200, {
          messages: found.map((m) => {
            const entry: Record<string, unknown> = { message: encodeMessage(toDeliveryMessage(m, store)) };
            if (m.lock) entry['lock-token'] = wrapUuid(m.lock.token);
            return entry;
          }),
        });
      }
      case 'com.microsoft:update-disposition': {
        const { entity } = ns.resolveStore(entityAddress);
        const stores = [entity.active, entity.deadLetter];
        const status = String(body['disposition-status'] ?? '');
        const props = body['properties-to-modify'] as Record<string, unknown> | undefined;
        for (const token of lockTokens(body)) {
          const store = storeHoldingLock(stores, token);
          switch (status) {
            case 'completed':
              store.complete(token);
              break;
            case 'abandoned':
              store.abandon(token, props);
              break;
            case 'defered':
            case 'deferred':
              store.defer(token, props);
              break;
            case 'suspended':
              store.deadLetter(token, {
                reason: body['deadletter-reason'] as string | undefined,
                description: body['deadletter-description'] as string | undefined,
                properties: props,
              });
              break;
            default:
              throw badRequest(`unknown disposition-status '${status}'`);
          }
        }
        return reply(request, 200, {});
      }
      default:
        throw new ManagementError(
          501,
          'amqp:not-implemented',
          `The management operation '${operation}' is not supported by this Service Bus emulator.`,
        );
    }
  } catch (err) {
    if (err instanceof ManagementError) return reply(request, err.status, {}, err.message, err.condition);
    if (err instanceof SettleError || err instanceof EntityError) {
      return reply(request, statusForCondition[err.condition] ?? 500, {}, err.message, err.condition);
    }
    return reply(request, 500, {}, (err as Error).message, 'amqp:internal-error');
  }
}
