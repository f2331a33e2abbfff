import { InvalidMessageError } from '../errors';
import { isUuid, uuidv7 } from '../util/uuidv7';
import { activeTrace } from '../observability/tracing';

/**
 * The contract-versioned event envelope carried as the JSON body of every rocketmq-tx event.
 * `eventId` is stable across every retry and republish; consumers dedupe on it and order
 * each aggregate's events by `aggregateVersion`.
 */
export interface Envelope<T = unknown> {
  readonly eventId: string;
  readonly eventType: string;
  readonly eventVersion: number;
  readonly aggregateType: string;
  readonly aggregateId: string;
  readonly aggregateVersion: number;
  /** ISO-8601 UTC, e.g. 2025-12-02T10:00:00.000Z. */
  readonly occurredAt: string;
  /** W3C trace id (or any correlation id), null when there is none. */
  readonly traceId: string | null;
  readonly data: T;
}

/** Message properties an envelope event adds (alongside TX_ID, TX_ORIGIN and EVENT_ID). */
export const EVENT_TYPE_PROPERTY = 'EVENT_TYPE';
export const AGGREGATE_ID_PROPERTY = 'AGGREGATE_ID';
export const ENVELOPE_PROPERTIES: readonly string[] = [EVENT_TYPE_PROPERTY, AGGREGATE_ID_PROPERTY];

export const ENVELOPE_FIELDS = [
  'eventId',
  'eventType',
  'eventVersion',
  'aggregateType',
  'aggregateId',
  'aggregateVersion',
  'occurredAt',
  'traceId',
  'data',
] as const;

const NAME_RE = /^[A-Za-z][A-Za-z0-9_.:-]{0,127}$/;
const NAME_RULE = '1-128 letters, digits, "_", ".", ":" or "-", starting with a letter';
// \s covers whitespace; \p{Cc} the control characters.
const AGGREGATE_ID_RE = /^[^\s\p{Cc}|]{1,128}$/u;
const AGGREGATE_ID_RULE = 'a string of 1-128 characters without whitespace, control characters or "|"';
const ISO_UTC_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const MAX_VERSION = 2_147_483_647;

export interface EnvelopeRules {
  /** Reject fields outside the envelope (producer side); consumers tolerate them for forward compatibility. */
  strict: boolean;
}

/** Validates a value as an Envelope; throws InvalidMessageError naming the field path and the bad value. */
export function validateEnvelope(value: unknown, path: string, rules: EnvelopeRules): Envelope {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidMessageError(path, value, `an envelope object { ${ENVELOPE_FIELDS.join(', ')} }`);
  }
  const v = value as Record<string, unknown>;
  if (rules.strict) {
    for (const key of Object.keys(v)) {
      if (!(ENVELOPE_FIELDS as readonly string[]).includes(key)) {
        throw new InvalidMessageError(
          `${path}.${key}`,
          v[key],
          `no such field (known: ${ENVELOPE_FIELDS.join(', ')})`,
        );
      }
    }
  }
  if (!isUuid(v.eventId)) throw new InvalidMessageError(`${path}.eventId`, v.eventId, 'a lowercase UUID');
  requireName(v.eventType, `${path}.eventType`);
  requireInt(v.eventVersion, `${path}.eventVersion`, MAX_VERSION);
  requireName(v.aggregateType, `${path}.aggregateType`);
  if (typeof v.aggregateId !== 'string' || !AGGREGATE_ID_RE.test(v.aggregateId)) {
    throw new InvalidMessageError(`${path}.aggregateId`, v.aggregateId, AGGREGATE_ID_RULE);
  }
  requireInt(v.aggregateVersion, `${path}.aggregateVersion`, Number.MAX_SAFE_INTEGER);
  if (
    typeof v.occurredAt !== 'string' ||
    !ISO_UTC_RE.test(v.occurredAt) ||
    Number.isNaN(Date.parse(v.occurredAt))
  ) {
    throw new InvalidMessageError(
      `${path}.occurredAt`,
      v.occurredAt,
      'an ISO-8601 UTC timestamp such as 2025-12-02T10:00:00.000Z',
    );
  }
  if (
    v.traceId !== null &&
    (typeof v.traceId !== 'string' || v.traceId.length === 0 || v.traceId.length > 256)
  ) {
    throw new InvalidMessageError(`${path}.traceId`, v.traceId, 'null or a string of 1-256 characters');
  }
  if (!('data' in v) || v.data === undefined) {
    throw new InvalidMessageError(`${path}.data`, v.data, 'a JSON value (use null for no data)');
  }
  return {
    eventId: v.eventId,
    eventType: v.eventType as string,
    eventVersion: v.eventVersion as number,
    aggregateType: v.aggregateType as string,
    aggregateId: v.aggregateId,
    aggregateVersion: v.aggregateVersion as number,
    occurredAt: v.occurredAt,
    traceId: v.traceId as string | null,
    data: v.data,
  };
}

function requireName(value: unknown, path: string): void {
  if (typeof value !== 'string' || !NAME_RE.test(value))
    throw new InvalidMessageError(path, value, NAME_RULE);
}

function requireInt(value: unknown, path: string, max: number): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw new InvalidMessageError(path, value, `an integer from 1 to ${max}`);
  }
}

/**
 * Deep-copies `value` as plain JSON data, rejecting anything that would not survive the trip
 * unchanged: class instances (an ORM entity is not a snapshot), Dates, Maps, functions,
 * undefined, NaN, BigInt and cycles. The path names the first offending field.
 */
export function snapshotData(value: unknown, path: string): unknown {
  return copy(value, path, new Set());
}

/** Nesting beyond this is refused (a typed error, not a stack overflow). */
export const MAX_DATA_DEPTH = 64;

function copy(value: unknown, path: string, seen: Set<object>): unknown {
  if (seen.size >= MAX_DATA_DEPTH && typeof value === 'object' && value !== null) {
    throw new InvalidMessageError(path, value, `JSON data nested at most ${MAX_DATA_DEPTH} levels deep`);
  }
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new InvalidMessageError(path, value, 'a finite number');
    return value;
  }
  if (typeof value !== 'object') {
    throw new InvalidMessageError(
      path,
      value,
      'JSON data (string, number, boolean, null, array, plain object)',
    );
  }
  if (seen.has(value)) throw new InvalidMessageError(path, value, 'JSON data without cycles');
  if (Array.isArray(value)) {
    seen.add(value);
    const out = value.map((item, i) => copy(item, `${path}[${i}]`, seen));
    seen.delete(value);
    return out;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) {
    const name = (value as { constructor?: { name?: string } }).constructor?.name ?? 'unknown';
    throw new InvalidMessageError(
      path,
      value,
      `a plain object snapshot, not an instance of ${name} (copy the fields you mean to publish; Dates as ISO strings)`,
    );
  }
  seen.add(value);
  const out: Record<string, unknown> = {};
  for (const [k, item] of Object.entries(value)) {
    if (item === undefined) continue; // as JSON.stringify does
    out[k] = copy(item, `${path}.${k}`, seen);
  }
  seen.delete(value);
  return out;
}

/** Fields the caller gives to build an envelope; the rest is generated. */
export interface EnvelopeInput<T> {
  eventType: string;
  eventVersion: number;
  aggregateType: string;
  aggregateId: string;
  aggregateVersion: number;
  data: T;
  /** Pass the same id again when republishing; generated (UUIDv7) otherwise. */
  eventId?: string;
  /** Date or ISO-8601 UTC string; now when absent. */
  occurredAt?: Date | string;
  /**
   * Absent: the trace id of the active OpenTelemetry span (when @opentelemetry/api is installed
   * and a span is active), else null. A string or null given here is kept as it is.
   */
  traceId?: string | null;
}

/**
 * Builds a validated, frozen envelope whose `data` is a deep snapshot of what was passed:
 * later changes to the caller's objects do not alter the event.
 */
export function createEnvelope<T>(input: EnvelopeInput<T>): Envelope<T> {
  if (typeof input !== 'object' || input === null) {
    throw new InvalidMessageError('envelope', input, 'an object { eventType, eventVersion, ... }');
  }
  const occurredAt =
    input.occurredAt === undefined
      ? new Date().toISOString()
      : input.occurredAt instanceof Date
        ? isoOrInvalid(input.occurredAt)
        : input.occurredAt;
  const candidate = {
    eventId: input.eventId ?? uuidv7(),
    eventType: input.eventType,
    eventVersion: input.eventVersion,
    aggregateType: input.aggregateType,
    aggregateId: input.aggregateId,
    aggregateVersion: input.aggregateVersion,
    occurredAt,
    // The caller's traceId (null included) wins; else the active OpenTelemetry span's, if any.
    traceId: input.traceId !== undefined ? input.traceId : (activeTrace()?.traceId ?? null),
    data: snapshotData(input.data, 'envelope.data'),
  };
  return deepFreeze(validateEnvelope(candidate, 'envelope', { strict: true })) as Envelope<T>;
}

function isoOrInvalid(d: Date): string {
  if (Number.isNaN(d.getTime())) throw new InvalidMessageError('envelope.occurredAt', d, 'a valid Date');
  return d.toISOString();
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const item of Object.values(value as object)) deepFreeze(item);
  }
  return value;
}

/** A named, versioned event contract: builds envelopes and identifies handlers. */
export interface EventDefinition<T> {
  readonly eventType: string;
  readonly eventVersion: number;
  readonly aggregateType: string;
  /** Builds an envelope of this type and version (data snapshotted, validated, frozen). */
  create(input: {
    aggregateId: string;
    aggregateVersion: number;
    data: T;
    eventId?: string;
    occurredAt?: Date | string;
    traceId?: string | null;
  }): Envelope<T>;
  /** True when an envelope has this definition's eventType and eventVersion. */
  is(envelope: Envelope): envelope is Envelope<T>;
}

/**
 * Declares an event contract. `validate` (optional) checks `data` on both sides: it throws,
 * or returns a message describing what is wrong, or returns nothing when the data is fine.
 */
export function defineEvent<T>(definition: {
  eventType: string;
  eventVersion: number;
  aggregateType: string;
  validate?: (data: unknown) => string | void;
}): EventDefinition<T> & { readonly validate?: (data: unknown) => string | void } {
  requireName(definition?.eventType, 'definition.eventType');
  requireInt(definition.eventVersion, 'definition.eventVersion', MAX_VERSION);
  requireName(definition.aggregateType, 'definition.aggregateType');
  if (definition.validate !== undefined && typeof definition.validate !== 'function') {
    throw new InvalidMessageError('definition.validate', definition.validate, 'a function');
  }
  const { eventType, eventVersion, aggregateType, validate } = definition;
  return Object.freeze({
    eventType,
    eventVersion,
    aggregateType,
    ...(validate ? { validate } : {}),
    create(input: Parameters<EventDefinition<T>['create']>[0]) {
      const envelope = createEnvelope<T>({ ...input, eventType, eventVersion, aggregateType });
      if (validate) checkData(validate, envelope.data, 'envelope.data');
      return envelope;
    },
    is(envelope: Envelope): envelope is Envelope<T> {
      return envelope.eventType === eventType && envelope.eventVersion === eventVersion;
    },
  });
}

/** Runs a user data validator and turns its verdict into an InvalidMessageError. */
export function checkData(validate: (data: unknown) => string | void, data: unknown, path: string): void {
  let verdict: string | void;
  try {
    verdict = validate(data);
  } catch (err) {
    throw new InvalidMessageError(path, data, err instanceof Error ? err.message : String(err), err);
  }
  if (typeof verdict === 'string' && verdict.length > 0) throw new InvalidMessageError(path, data, verdict);
}

/** JSON body of an envelope, with fields in a fixed order. */
export function serializeEnvelope(envelope: Envelope): Buffer {
  const ordered: Record<string, unknown> = {};
  for (const f of ENVELOPE_FIELDS) ordered[f] = envelope[f];
  return Buffer.from(JSON.stringify(ordered), 'utf8');
}

/**
 * Parses and validates a message body as an envelope (consumer side). Throws
 * InvalidMessageError for a body that is too large, not UTF-8 JSON, or not an envelope.
 */
export function parseEnvelope(body: Buffer, maxBytes: number): Envelope {
  if (body.length === 0) throw new InvalidMessageError('body', body, 'a JSON envelope (got an empty body)');
  if (body.length > maxBytes) {
    throw new InvalidMessageError('body', body, `a body of at most ${maxBytes} bytes`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    // The body is never echoed (it may hold sensitive data), nor JSON.parse's error, which quotes it.
    throw new InvalidMessageError('body', body, 'a JSON envelope');
  }
  return validateEnvelope(parsed, 'body', { strict: false });
}
