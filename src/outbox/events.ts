import { InvalidMessageError } from '../errors';
import type { OutgoingMessage } from '../broker/gateway';
import {
  EVENT_ID_PROPERTY,
  RESERVED_PROPERTIES,
  TX_ID_PROPERTY,
  TX_ORIGIN_PROPERTY,
} from '../checkback/resolution';
import { isUuid, uuidv7 } from '../util/uuidv7';
import { isPlainObject } from '../util/validate';
import {
  AGGREGATE_ID_PROPERTY,
  ENVELOPE_PROPERTIES,
  EVENT_TYPE_PROPERTY,
  serializeEnvelope,
  snapshotData,
  validateEnvelope,
  type Envelope,
} from '../envelope/envelope';
import { traceProperties } from '../observability/tracing';
import type { NewOutboxEvent, OutboxInitialStatus } from '../store/ports';

/** One event of a transaction. `body` is snapshotted (serialized) when transact is called. */
export interface BodyEvent {
  topic: string;
  tag?: string;
  keys?: readonly string[];
  /** Buffer and string are sent as they are; any other JSON value is sent as JSON. */
  body: Buffer | string | number | boolean | null | readonly unknown[] | Record<string, unknown>;
  properties?: Readonly<Record<string, string>>;
  /** Stable event id (UUID); generated (UUIDv7) when absent. Carried in keys and property EVENT_ID. */
  eventId?: string;
  event?: never;
}

/**
 * An envelope event: the body is the JSON of the envelope's snapshot, taken when transact is
 * called; eventId is the envelope's; keys add aggregateId; properties add EVENT_TYPE and AGGREGATE_ID.
 */
export interface EnvelopeEvent {
  topic: string;
  event: Envelope;
  tag?: string;
  keys?: readonly string[];
  properties?: Readonly<Record<string, string>>;
  body?: never;
  eventId?: never;
}

export type TransactEvent = BodyEvent | EnvelopeEvent;

export interface PreparedEvent {
  eventId: string;
  message: OutgoingMessage;
  /** The validated snapshot, for envelope events (its aggregate columns go to outbox_event). */
  envelope?: Envelope;
}

/** The upper bound (and default) of the producer's and reconciler's `maxMessageBytes`. */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
export const MAX_EVENTS_PER_TRANSACTION = 64;
export const MAX_KEYS = 32;
export const MAX_KEY_LENGTH = 128;
export const MAX_TAG_LENGTH = 128;
/** User properties per event; the proxy allows 128 in all (userPropertyMaxNum), ours included. */
export const MAX_USER_PROPERTIES = 64;
/** Names and values of user properties in UTF-8 bytes; the proxy allows 16 KiB in all, ours included. */
export const MAX_USER_PROPERTY_BYTES = 15 * 1024;
const PROPERTY_NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;
// Control characters would corrupt the broker's property encoding (\u0001 / \u0002 separate
// names and values), so a value could smuggle in a property of its own.
const CONTROL_RE = /\p{Cc}/u;
/** Broker system properties (MessageConst): a user value would change how the broker treats the message. */
const BROKER_PROPERTIES = new Set(
  (
    'KEYS TAGS WAIT DELAY RETRY_TOPIC REAL_TOPIC REAL_QID TRAN_MSG PGROUP MIN_OFFSET MAX_OFFSET BUYER_ID ' +
    'ORIGIN_MESSAGE_ID TRANSFER_FLAG CORRECTION_FLAG MQ2_FLAG RECONSUME_TIME MSG_REGION TRACE_ON UNIQ_KEY ' +
    'EXTEND_UNIQ_INFO MAX_RECONSUME_TIMES CONSUME_START_TIME INNER_NUM INNER_BASE ' +
    'CHECK_IMMUNITY_TIME_IN_SECONDS TRAN_PREPARED_QUEUE_OFFSET TRANSACTION_CHECK_TIMES INSTANCE_ID ' +
    'CORRELATION_ID REPLY_TO_CLIENT TTL ARRIVE_TIME PUSH_REPLY_TIME CLUSTER MSG_TYPE POP_CK POP_CK_OFFSET ' +
    '1ST_POP_TIME PROPERTY_FORWARD_QUEUE_ID REDIRECT INNER_MULTI_DISPATCH INNER_MULTI_QUEUE_OFFSET ' +
    'TRACE_CONTEXT TIMER_DELAY_SEC TIMER_DELIVER_MS BORN_TIMESTAMP TIMER_ENQUEUE_MS TIMER_DEQUEUE_MS ' +
    'TIMER_ROLL_TIMES TIMER_OUT_MS TIMER_DEL_UNIQKEY TIMER_DELAY_LEVEL TIMER_DELAY_MS DLQ_ORIGIN_TOPIC ' +
    'DLQ_ORIGIN_MESSAGE_ID'
  ).split(' '),
);
/** Properties rocketmq-tx sets itself (compared case-insensitively): never taken from the caller. */
export const SDK_PROPERTIES: readonly string[] = [
  ...RESERVED_PROPERTIES,
  ...ENVELOPE_PROPERTIES,
  'traceparent',
  'tracestate',
];
const SDK_PROPERTIES_LOWER = new Set(SDK_PROPERTIES.map((n) => n.toLowerCase()));

/** Why a user property name is not allowed, or undefined when it is. */
function reservedReason(name: string): string | undefined {
  if (SDK_PROPERTIES_LOWER.has(name.toLowerCase())) return `${name} is set by rocketmq-tx`;
  if (BROKER_PROPERTIES.has(name.toUpperCase()) || name.startsWith('__'))
    return `${name} is a RocketMQ system property`;
  return undefined;
}
// A tag is a filter expression token on the consumer side: "a||b" and "*" have meanings there.
const TAG_RE = /^[^\s\p{Cc}|]+$/u;
const KNOWN = ['topic', 'tag', 'keys', 'body', 'properties', 'eventId', 'event'];

export interface EventRules {
  topics: readonly string[];
  maxMessageBytes: number;
  producerGroup: string;
}

/** Validates and serializes events; throws InvalidMessageError naming the field path. */
export function prepareEvents(input: unknown, txId: string, rules: EventRules): PreparedEvent[] {
  // Array.from: a hole in a sparse array is checked (as undefined), not skipped.
  const list: unknown[] = Array.isArray(input) ? Array.from(input as unknown[]) : [input];
  if (list.length === 0)
    throw new InvalidMessageError('events', input, 'one event or a non-empty array of events');
  if (list.length > MAX_EVENTS_PER_TRANSACTION) {
    throw new InvalidMessageError(
      'events',
      input,
      `at most ${MAX_EVENTS_PER_TRANSACTION} events per transaction`,
    );
  }
  const seen = new Set<string>();
  return list.map((raw, i) => {
    const path = Array.isArray(input) ? `events[${i}]` : 'event';
    const prepared = prepareOne(raw, path, txId, rules);
    if (seen.has(prepared.eventId)) {
      throw new InvalidMessageError(
        `${path}.eventId`,
        prepared.eventId,
        'an eventId not repeated in one transaction',
      );
    }
    seen.add(prepared.eventId);
    return prepared;
  });
}

function prepareOne(raw: unknown, path: string, txId: string, rules: EventRules): PreparedEvent {
  if (!isPlainObject(raw)) throw new InvalidMessageError(path, raw, 'an object { topic, body, ... }');
  for (const key of Object.keys(raw)) {
    if (!KNOWN.includes(key)) {
      throw new InvalidMessageError(`${path}.${key}`, raw[key], `no such field (known: ${KNOWN.join(', ')})`);
    }
  }
  const topic = raw.topic;
  if (typeof topic !== 'string' || !rules.topics.includes(topic)) {
    throw new InvalidMessageError(
      `${path}.topic`,
      topic,
      `one of the producer's declared topics (${rules.topics.join(', ')})`,
    );
  }
  const tag = raw.tag;
  if (
    tag !== undefined &&
    (typeof tag !== 'string' || !TAG_RE.test(tag) || tag.length > MAX_TAG_LENGTH || tag === '*')
  ) {
    throw new InvalidMessageError(
      `${path}.tag`,
      tag,
      `a tag of 1-${MAX_TAG_LENGTH} characters without whitespace, control characters or "|" (not "*")`,
    );
  }
  const envelope = raw.event === undefined ? undefined : envelopeOf(raw, path);
  const eventId = envelope ? envelope.eventId : raw.eventId === undefined ? uuidv7() : raw.eventId;
  if (!isUuid(eventId)) throw new InvalidMessageError(`${path}.eventId`, eventId, 'a lowercase UUID string');
  const userKeys = validateKeys(raw.keys, `${path}.keys`);
  const keys = envelope
    ? [envelope.aggregateId, ...userKeys.filter((k) => k !== envelope.aggregateId)]
    : userKeys;
  const properties = validateProperties(raw.properties, `${path}.properties`);
  const body = envelope ? serializeEnvelope(envelope) : serializeBody(raw.body, `${path}.body`);
  if (body.length > rules.maxMessageBytes) {
    throw new InvalidMessageError(
      envelope ? `${path}.event` : `${path}.body`,
      body,
      `a body of at most ${rules.maxMessageBytes} bytes (maxMessageBytes)`,
    );
  }
  return {
    eventId,
    ...(envelope ? { envelope } : {}),
    message: {
      topic,
      ...(tag !== undefined ? { tag } : {}),
      keys: [eventId, ...keys.filter((k) => k !== eventId)],
      properties: {
        ...properties,
        // W3C trace context of the active OpenTelemetry span, when there is one.
        ...traceProperties(),
        [TX_ID_PROPERTY]: txId,
        [TX_ORIGIN_PROPERTY]: rules.producerGroup,
        [EVENT_ID_PROPERTY]: eventId,
        ...(envelope
          ? { [EVENT_TYPE_PROPERTY]: envelope.eventType, [AGGREGATE_ID_PROPERTY]: envelope.aggregateId }
          : {}),
      },
      body,
    },
  };
}

/** The envelope of an `event` field, validated and deep-copied (never a live object of the caller's). */
function envelopeOf(raw: Record<string, unknown>, path: string): Envelope {
  if (raw.body !== undefined) {
    throw new InvalidMessageError(
      `${path}.body`,
      raw.body,
      'no body when event is given (the envelope is the body)',
    );
  }
  if (raw.eventId !== undefined) {
    throw new InvalidMessageError(
      `${path}.eventId`,
      raw.eventId,
      'no eventId when event is given (event.eventId is used)',
    );
  }
  const checked = validateEnvelope(raw.event, `${path}.event`, { strict: true });
  return { ...checked, data: snapshotData(checked.data, `${path}.event.data`) };
}

const KEY_RE = /^[^\s\p{Cc}]+$/u;

function validateKeys(value: unknown, path: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > MAX_KEYS) {
    throw new InvalidMessageError(path, value, `an array of at most ${MAX_KEYS} keys`);
  }
  return value.map((k: unknown, i: number) => {
    // The broker joins keys with a space: a key with whitespace would become several keys.
    if (typeof k !== 'string' || !KEY_RE.test(k) || k.length > MAX_KEY_LENGTH) {
      throw new InvalidMessageError(
        `${path}[${i}]`,
        k,
        `a key of 1-${MAX_KEY_LENGTH} characters without whitespace or control characters`,
      );
    }
    return k;
  });
}

function validateProperties(value: unknown, path: string): Record<string, string> {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw new InvalidMessageError(path, value, 'an object of string values');
  const entries = Object.entries(value);
  if (entries.length > MAX_USER_PROPERTIES) {
    throw new InvalidMessageError(path, value, `at most ${MAX_USER_PROPERTIES} properties`);
  }
  let bytes = 0;
  for (const [name, v] of entries) {
    if (!PROPERTY_NAME_RE.test(name)) {
      throw new InvalidMessageError(
        `${path}.${name}`,
        name,
        'a property name of 1-64 letters, digits, "_", "." or "-"',
      );
    }
    const reserved = reservedReason(name);
    if (reserved !== undefined) {
      throw new InvalidMessageError(`${path}.${name}`, v, `no value: ${reserved}`);
    }
    if (typeof v !== 'string') throw new InvalidMessageError(`${path}.${name}`, v, 'a string');
    if (CONTROL_RE.test(v)) {
      throw new InvalidMessageError(`${path}.${name}`, v, 'a string without control characters');
    }
    bytes += Buffer.byteLength(name) + Buffer.byteLength(v);
  }
  if (bytes > MAX_USER_PROPERTY_BYTES) {
    throw new InvalidMessageError(
      path,
      value,
      `properties of at most ${MAX_USER_PROPERTY_BYTES} bytes (names and values, UTF-8) in all`,
    );
  }
  return { ...(value as Record<string, string>) };
}

function serializeBody(value: unknown, path: string): Buffer {
  if (Buffer.isBuffer(value)) {
    if (value.length === 0) throw new InvalidMessageError(path, value, 'a non-empty body');
    return Buffer.from(value); // copy: later changes by the caller do not alter the event
  }
  if (typeof value === 'string') {
    if (value.length === 0) throw new InvalidMessageError(path, value, 'a non-empty body');
    return Buffer.from(value, 'utf8');
  }
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol') {
    throw new InvalidMessageError(path, value, 'a Buffer, a string or a JSON value');
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    throw new InvalidMessageError(path, value, 'a JSON-serializable value (no cycles, no BigInt)', err);
  }
  if (json === undefined) throw new InvalidMessageError(path, value, 'a JSON-serializable value');
  return Buffer.from(json, 'utf8');
}

/** The snapshot of each event, as the relay needs it to rebuild the exact message. */
export function outboxRows(
  txId: string,
  prepared: PreparedEvent[],
  status: OutboxInitialStatus,
): NewOutboxEvent[] {
  return prepared.map(({ eventId, message, envelope }) => ({
    eventId,
    txId,
    topic: message.topic,
    ...(message.tag !== undefined ? { tag: message.tag } : {}),
    keys: message.keys,
    properties: message.properties,
    body: message.body,
    ...(envelope
      ? {
          aggregateType: envelope.aggregateType,
          aggregateId: envelope.aggregateId,
          aggregateVersion: envelope.aggregateVersion,
          eventType: envelope.eventType,
          eventVersion: envelope.eventVersion,
          occurredAt: new Date(envelope.occurredAt),
          ...(envelope.traceId ? { traceId: envelope.traceId } : {}),
        }
      : {}),
    status,
  }));
}
