/**
 * Property-based tests of envelope and event validation (producer and consumer side): thousands
 * of generated inputs are either accepted and valid, or rejected with a typed InvalidMessageError
 * whose path names the field. Reserved properties can never be set or overridden by the caller.
 */
import fc from 'fast-check';
import { InvalidMessageError, RocketMqTxError } from '../../src';
import {
  ENVELOPE_FIELDS,
  createEnvelope,
  parseEnvelope,
  serializeEnvelope,
  validateEnvelope,
} from '../../src/envelope/envelope';
import {
  MAX_EVENTS_PER_TRANSACTION,
  MAX_KEYS,
  MAX_USER_PROPERTIES,
  MAX_USER_PROPERTY_BYTES,
  SDK_PROPERTIES,
  prepareEvents,
} from '../../src/outbox/events';
import { isUuid, uuidv7 } from '../../src/util/uuidv7';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 2000);
const TX = '0192f5a0-0000-7000-8000-000000000001';
const rules = { topics: ['orders_tx', 'audit_tx'], maxMessageBytes: 64 * 1024, producerGroup: 'orders' };

const hostile = (): fc.Arbitrary<unknown> =>
  fc.oneof(
    fc.anything({
      maxDepth: 3,
      withBoxedValues: true,
      withMap: true,
      withSet: true,
      withNullPrototype: true,
      withBigInt: true,
      withDate: true,
      withTypedArray: true,
      withSparseArray: true,
    }),
    fc.string({ unit: 'binary', maxLength: 200 }),
    fc.constantFrom(
      '',
      ' ',
      'a b',
      'a|b',
      '*',
      'x\u0001TX_ID\u0002y',
      'x'.repeat(200),
      0,
      -1,
      2 ** 31,
      1.5,
      NaN,
      null,
      '2025-12-02T10:00:00.000Z',
      '2025-13-45T10:00:00Z',
      uuidv7().toUpperCase(),
    ),
  );

function jsonOrNull(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'null';
  } catch {
    return 'null'; // BigInt, cycles: not JSON at all
  }
}

const validEnvelope = () => ({
  eventId: uuidv7(),
  eventType: 'OrderPaid',
  eventVersion: 1,
  aggregateType: 'Order',
  aggregateId: 'order-1',
  aggregateVersion: 3,
  occurredAt: '2025-12-02T10:00:00.000Z',
  traceId: null,
  data: { amount: 10 },
});

/** A valid envelope with up to three fields replaced by hostile values, removed, or an extra field added. */
const mutatedEnvelope = fc
  .tuple(
    fc.uniqueArray(fc.constantFrom(...ENVELOPE_FIELDS, 'extra'), { maxLength: 3 }),
    fc.array(fc.option(hostile(), { nil: undefined }), { minLength: 3, maxLength: 3 }),
  )
  .map(([fields, values]) => {
    const e: Record<string, unknown> = validEnvelope();
    fields.forEach((f, i) => {
      if (values[i] === undefined) delete e[f];
      else e[f] = values[i];
    });
    return e;
  });

/** `fields`: the known fields; an unknown field may also be named when it is a key of `value`. */
function expectTypedMessageError(err: unknown, rootPath: string, fields: readonly string[], value?: unknown) {
  if (!(err instanceof RocketMqTxError)) throw new Error(`non-typed error: ${String(err)}`);
  expect(err).toBeInstanceOf(InvalidMessageError);
  expect(err.code).toBe('INVALID_MESSAGE');
  expect(err.retriable).toBe(false);
  const path = (err as InvalidMessageError).path;
  expect(err.message).toContain(path);
  expect(namesField(path, rootPath, fields, value)).toBe(true);
}

/** True when `path` is `root`, or `root.<field>` (optionally deeper) for a known field or a key of `value`. */
function namesField(path: string, root: string, fields: readonly string[], value: unknown): boolean {
  if (path === root) return true;
  const own = typeof value === 'object' && value !== null ? Object.keys(value) : [];
  return [...fields, ...own].some((f) => {
    const p = `${root}.${f}`;
    return path === p || path.startsWith(`${p}.`) || path.startsWith(`${p}[`);
  });
}

function expectValidEnvelope(e: ReturnType<typeof validateEnvelope>) {
  expect(isUuid(e.eventId)).toBe(true);
  expect(e.eventType).toMatch(/^[A-Za-z][A-Za-z0-9_.:-]{0,127}$/);
  expect(Number.isInteger(e.eventVersion) && e.eventVersion >= 1).toBe(true);
  expect(Number.isSafeInteger(e.aggregateVersion) && e.aggregateVersion >= 1).toBe(true);
  expect(Date.parse(e.occurredAt)).not.toBeNaN();
  expect(e.data).not.toBeUndefined();
}

describe('envelope validation under generated input', () => {
  it('validateEnvelope: a valid Envelope or an InvalidMessageError naming the field', () => {
    let accepted = 0;
    fc.assert(
      fc.property(fc.oneof(mutatedEnvelope, hostile()), fc.boolean(), (value, strict) => {
        let e;
        try {
          e = validateEnvelope(value, 'body', { strict });
        } catch (err) {
          expectTypedMessageError(err, 'body', [...ENVELOPE_FIELDS, 'extra'], value);
          return;
        }
        accepted++;
        expectValidEnvelope(e);
      }),
      { numRuns: RUNS },
    );
    expect(accepted).toBeGreaterThan(RUNS / 50);
  });

  it('parseEnvelope: arbitrary bytes and JSON give an Envelope or an InvalidMessageError at body', () => {
    const bodies = fc.oneof(
      fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
      mutatedEnvelope.map((e) => Buffer.from(jsonOrNull(e))),
      fc.json().map((j) => Buffer.from(j)),
    );
    fc.assert(
      fc.property(bodies, (body) => {
        let e;
        try {
          e = parseEnvelope(body, 1024);
        } catch (err) {
          expectTypedMessageError(err, 'body', [...ENVELOPE_FIELDS]);
          return;
        }
        expectValidEnvelope(e);
        // What a consumer accepts round-trips through the producer's serialization unchanged.
        expect(parseEnvelope(serializeEnvelope(e), 1024)).toEqual(e);
      }),
      { numRuns: RUNS },
    );
  });

  it('createEnvelope: a frozen valid Envelope or an InvalidMessageError naming the field', () => {
    const inputs = fc.record(
      {
        eventType: fc.oneof(fc.constant('OrderPaid'), hostile()),
        eventVersion: fc.oneof(fc.constant(1), hostile()),
        aggregateType: fc.oneof(fc.constant('Order'), hostile()),
        aggregateId: fc.oneof(fc.constant('o-1'), hostile()),
        aggregateVersion: fc.oneof(fc.constant(1), hostile()),
        data: hostile(),
        eventId: fc.oneof(fc.constant(uuidv7()), hostile()),
        occurredAt: fc.oneof(fc.date({ noInvalidDate: false }), hostile()),
        traceId: hostile(),
      },
      { requiredKeys: ['eventType', 'eventVersion', 'aggregateType', 'aggregateId', 'aggregateVersion'] },
    );
    let accepted = 0;
    fc.assert(
      fc.property(inputs, (input) => {
        let e;
        try {
          e = createEnvelope(input as Parameters<typeof createEnvelope>[0]);
        } catch (err) {
          expectTypedMessageError(err, 'envelope', [...ENVELOPE_FIELDS]);
          return;
        }
        accepted++;
        expectValidEnvelope(e);
        expect(Object.isFrozen(e)).toBe(true);
      }),
      { numRuns: RUNS },
    );
    expect(accepted).toBeGreaterThan(0);
  });

  it('deeply nested data is an InvalidMessageError, not a stack overflow', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(() =>
      createEnvelope({
        eventType: 'OrderPaid',
        eventVersion: 1,
        aggregateType: 'Order',
        aggregateId: 'o-1',
        aggregateVersion: 1,
        data: deep,
      }),
    ).toThrow(InvalidMessageError);
    expect(() => prepareEvents({ topic: 'orders_tx', body: deep as unknown[] }, TX, rules)).toThrow(
      InvalidMessageError,
    );
  });
});

const EVENT_FIELDS = ['topic', 'tag', 'keys', 'body', 'properties', 'eventId', 'event'];

/** Body and envelope events with hostile fields, and hostile property maps (reserved names included). */
const hostileProperties = fc.oneof(
  hostile(),
  fc.dictionary(
    fc.oneof(
      fc.constantFrom(...SDK_PROPERTIES, 'tx_id', 'Tx_Origin', 'TRACEPARENT', 'DELAY', 'UNIQ_KEY', '__x'),
      fc.string({ minLength: 1, maxLength: 70 }),
    ),
    fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 40 }), hostile()),
    { maxKeys: 8 },
  ),
);
const plausibleEvent = fc.oneof(
  fc.record({
    topic: fc.constantFrom('orders_tx', 'audit_tx'),
    body: fc.oneof(fc.string({ minLength: 1 }), fc.jsonValue()),
    properties: fc.dictionary(fc.stringMatching(/^[a-z][a-z0-9_]{0,9}$/), fc.string({ maxLength: 20 })),
  }),
  fc.record({ topic: fc.constantFrom('orders_tx', 'audit_tx'), event: fc.constant(null).map(validEnvelope) }),
);
const hostileEvent = fc.oneof(
  plausibleEvent,
  fc.record(
    {
      topic: fc.oneof(fc.constantFrom('orders_tx', 'audit_tx'), hostile()),
      tag: hostile(),
      keys: fc.oneof(fc.array(fc.string({ maxLength: 20 }), { maxLength: MAX_KEYS + 2 }), hostile()),
      body: fc.oneof(fc.string({ minLength: 1 }), hostile()),
      properties: hostileProperties,
      eventId: fc.oneof(fc.constant(uuidv7()), hostile()),
    },
    { requiredKeys: ['topic', 'body'] },
  ),
  fc.record(
    {
      topic: fc.constantFrom('orders_tx', 'audit_tx'),
      event: fc.oneof(mutatedEnvelope, hostile()),
      tag: fc.oneof(fc.constant('paid'), hostile()),
      properties: hostileProperties,
      extra: hostile(),
    },
    { requiredKeys: ['topic', 'event'] },
  ),
  hostile(),
);

describe('transact events under generated input', () => {
  it('prepareEvents: valid messages whose reserved properties are ours, or an InvalidMessageError naming the field', () => {
    let accepted = 0;
    fc.assert(
      fc.property(fc.oneof(hostileEvent, fc.array(hostileEvent, { maxLength: 5 })), (input) => {
        let prepared;
        try {
          prepared = prepareEvents(input, TX, rules);
        } catch (err) {
          if (!(err instanceof RocketMqTxError)) throw new Error(`non-typed error: ${String(err)}`);
          expect(err).toBeInstanceOf(InvalidMessageError);
          const path = (err as InvalidMessageError).path;
          const index = /^events\[(\d+)\]/.exec(path);
          const root = Array.isArray(input) ? (index ? index[0] : 'events') : 'event';
          const event: unknown = index && Array.isArray(input) ? input[Number(index[1])] : input;
          expect(path === 'events' || namesField(path, root, EVENT_FIELDS, event)).toBe(true);
          return;
        }
        accepted++;
        for (const p of prepared) {
          const props = p.message.properties;
          // The SDK's own properties come from the SDK, never from the caller.
          expect(props.TX_ID).toBe(TX);
          expect(props.TX_ORIGIN).toBe('orders');
          expect(props.EVENT_ID).toBe(p.eventId);
          if (p.envelope) {
            expect(props.EVENT_TYPE).toBe(p.envelope.eventType);
            expect(props.AGGREGATE_ID).toBe(p.envelope.aggregateId);
          } else {
            expect(props.EVENT_TYPE).toBeUndefined();
            expect(props.AGGREGATE_ID).toBeUndefined();
          }
          const user = Object.keys(props).filter(
            (k) => !['TX_ID', 'TX_ORIGIN', 'EVENT_ID', 'EVENT_TYPE', 'AGGREGATE_ID'].includes(k),
          );
          for (const k of user) {
            expect(SDK_PROPERTIES.map((n) => n.toLowerCase())).not.toContain(k.toLowerCase());
            expect(props[k]).not.toMatch(/\p{Cc}/u);
          }
          expect(user.length).toBeLessThanOrEqual(MAX_USER_PROPERTIES);
          expect(isUuid(p.eventId)).toBe(true);
          expect(rules.topics).toContain(p.message.topic);
          expect(p.message.body.length).toBeGreaterThan(0);
          expect(p.message.body.length).toBeLessThanOrEqual(rules.maxMessageBytes);
          expect(p.message.keys[0]).toBe(p.eventId);
          for (const k of p.message.keys) expect(k).toMatch(/^[^\s\p{Cc}]{1,128}$/u);
          if (p.message.tag !== undefined) expect(p.message.tag).toMatch(/^[^\s\p{Cc}|]{1,128}$/u);
        }
      }),
      { numRuns: RUNS },
    );
    expect(accepted).toBeGreaterThan(RUNS / 50);
  });

  it('names each limit in its error message', () => {
    const ok = { topic: 'orders_tx', body: 'x' };
    const messageOf = (input: unknown, r = rules) => {
      try {
        prepareEvents(input, TX, r);
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidMessageError);
        return (err as Error).message;
      }
      throw new Error('expected a rejection');
    };
    expect(messageOf(Array.from({ length: MAX_EVENTS_PER_TRANSACTION + 1 }, () => ok))).toContain(
      `at most ${MAX_EVENTS_PER_TRANSACTION} events per transaction`,
    );
    expect(messageOf({ ...ok, body: Buffer.alloc(101) }, { ...rules, maxMessageBytes: 100 })).toContain(
      'at most 100 bytes',
    );
    const many = Object.fromEntries(
      Array.from({ length: MAX_USER_PROPERTIES + 1 }, (_, i) => [`p${i}`, 'v']),
    );
    expect(messageOf({ ...ok, properties: many })).toContain(`at most ${MAX_USER_PROPERTIES} properties`);
    expect(messageOf({ ...ok, properties: { big: 'x'.repeat(MAX_USER_PROPERTY_BYTES) } })).toContain(
      `at most ${MAX_USER_PROPERTY_BYTES} bytes`,
    );
    expect(messageOf({ ...ok, keys: Array.from({ length: MAX_KEYS + 1 }, (_, i) => `k${i}`) })).toContain(
      `at most ${MAX_KEYS} keys`,
    );
    expect(messageOf({ ...ok, keys: ['two words'] })).toContain('without whitespace');
    expect(messageOf({ ...ok, tag: 'x'.repeat(129) })).toContain('1-128 characters');
    expect(messageOf({ ...ok, tag: 'a||b' })).toContain('"|"');
    expect(messageOf({ ...ok, topic: 'other' })).toContain('declared topics');
  });

  it.each([
    ['TX_ID'],
    ['tx_id'],
    ['TX_ORIGIN'],
    ['EVENT_ID'],
    ['EVENT_TYPE'],
    ['AGGREGATE_ID'],
    ['traceparent'],
    ['tracestate'],
    ['DELAY'],
    ['TIMER_DELIVER_MS'],
    ['CHECK_IMMUNITY_TIME_IN_SECONDS'],
    ['__SHARDINGKEY'],
  ])('refuses a user property named %s (reserved), on body and envelope events', (name) => {
    const body = { topic: 'orders_tx', body: 'x', properties: { [name]: 'forged' } };
    const envelope = { topic: 'orders_tx', event: validEnvelope(), properties: { [name]: 'forged' } };
    for (const e of [body, envelope]) {
      expect(() => prepareEvents(e, TX, rules)).toThrow(
        expect.objectContaining({ path: `event.properties.${name}` }),
      );
    }
  });

  it('refuses a property value that would inject a property through the broker encoding', () => {
    expect(() =>
      prepareEvents(
        { topic: 'orders_tx', body: 'x', properties: { note: 'a\u0002TX_ID\u0001forged' } },
        TX,
        rules,
      ),
    ).toThrow(expect.objectContaining({ path: 'event.properties.note' }));
  });
});
