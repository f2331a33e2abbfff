/**
 * Property-based tests of option validation: thousands of generated (mostly hostile) option
 * objects for the producer, the consumer and the relay. Every input is either accepted with
 * values inside the documented rules, or rejected with a typed, non-retriable InvalidOptionError
 * whose `option` names the offending field. Nothing else may escape (no TypeError, no crash).
 */
import fc from 'fast-check';
import { InvalidOptionError, RocketMqTxError } from '../../src';
import { resolveProducerOptions } from '../../src/producer/options';
import { resolveConsumerOptions } from '../../src/consumer/options';
import { resolveRelayOptions } from '../../src/relay/options';
import { fakeDataSource, Journal } from './fakes/fakes';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 2000);
const SECRET = 'S3cr3t-property-test-value';

/** Values that break naive validators: wrong types, boxed values, huge numbers, odd strings. */
const hostile = (): fc.Arbitrary<unknown> =>
  fc.oneof(
    fc.anything({
      maxDepth: 2,
      withBoxedValues: true,
      withMap: true,
      withSet: true,
      withNullPrototype: true,
      withBigInt: true,
      withDate: true,
      withTypedArray: true,
      withSparseArray: true,
    }),
    fc.string(),
    fc.string({ unit: 'binary', maxLength: 300 }),
    fc.integer(),
    fc.double(),
    fc.constantFrom(
      '',
      ' ',
      '127.0.0.1:8081',
      '127.0.0.1:99999',
      'a;b',
      'x'.repeat(300),
      '%RETRY%g',
      0,
      -1,
      1.5,
      Number.MAX_SAFE_INTEGER,
      NaN,
      Infinity,
      true,
      null,
      [],
      {},
      ['rmqtx_tx_0'],
      ['rmqtx_tx_0', 'bad topic'],
      () => undefined,
    ),
  );

/** A patch over a valid base: known keys (and a few unknown ones) set to hostile values, or deleted. */
function patchOf(keys: readonly string[], nested: Record<string, readonly string[]>) {
  const value = (key: string): fc.Arbitrary<unknown> => {
    const inner = nested[key];
    if (!inner) return hostile();
    return fc.oneof(
      hostile(),
      fc.dictionary(fc.constantFrom(...inner, 'extra', '__proto__'), hostile(), { maxKeys: 4 }),
    );
  };
  return fc
    .uniqueArray(fc.constantFrom(...keys, 'unknownOption'), { minLength: 1, maxLength: 4 })
    .chain((chosen) =>
      fc.tuple(...chosen.map((k) => fc.option(value(k), { nil: undefined }))).map((values) => {
        const patch: Record<string, unknown> = {};
        chosen.forEach((k, i) => (patch[k] = values[i]));
        return patch;
      }),
    );
}

/** The rule every rejection must follow. */
function expectTypedRejection(err: unknown, patch: Record<string, unknown>, known: readonly string[]) {
  if (!(err instanceof RocketMqTxError)) {
    throw new Error(`non-typed error for patch keys ${Object.keys(patch).join(',')}: ${String(err)}`);
  }
  expect(err).toBeInstanceOf(InvalidOptionError);
  expect(err.code).toBe('INVALID_OPTION');
  expect(err.retriable).toBe(false);
  const option = (err as InvalidOptionError).option;
  const root = option.split(/[.[]/)[0]!;
  // The error names a real field (one of the patch, or one checked against it), or the object itself.
  expect(['options', ...known, ...Object.keys(patch)]).toContain(root);
  expect(err.message).toContain(option);
  // The secret of credentials is never echoed.
  expect(err.message).not.toContain(SECRET);
}

function apply(base: Record<string, unknown>, patch: Record<string, unknown>) {
  const o = { ...base };
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined) delete o[k];
    else o[k] = v;
  }
  return o;
}

function within(n: unknown, min: number, max: number): boolean {
  return typeof n === 'number' && Number.isInteger(n) && n >= min && n <= max;
}

const ENDPOINTS_RE = /^[A-Za-z0-9.-]+(:\d{1,5})?(;[A-Za-z0-9.-]+(:\d{1,5})?)*$/;
const NAME_RE = /^[%A-Za-z0-9_-]{1,127}$/;
const NESTED_CREDENTIALS = ['accessKey', 'accessSecret'];
const NESTED_TLS = ['caFile', 'ca'];

describe('option validation under generated input', () => {
  const dataSource = fakeDataSource(new Journal());

  it('TransactionalProducer options: accepted and within the rules, or a typed error naming the field', () => {
    const base = {
      endpoints: '127.0.0.1:8081',
      dataSource,
      producerGroup: 'orders',
      topics: ['orders_tx'],
      credentials: { accessKey: 'ak', accessSecret: SECRET },
    };
    const keys = [
      'endpoints',
      'dataSource',
      'producerGroup',
      'topics',
      'namespace',
      'checkBack',
      'credentials',
      'sslEnabled',
      'tls',
      'requestTimeoutMs',
      'startTimeoutMs',
      'shutdownTimeoutMs',
      'maxMessageBytes',
      'delivery',
      'outboxFallback',
      'onOutcome',
      'logger',
    ];
    const nested = {
      checkBack: ['resolver', 'resolverScope', 'concurrency', 'maxQueued', 'lockWaitTimeoutMs', 'onResolved'],
      credentials: NESTED_CREDENTIALS,
      tls: NESTED_TLS,
    };
    let accepted = 0;
    fc.assert(
      fc.property(patchOf(keys, nested), (patch) => {
        let o;
        try {
          o = resolveProducerOptions(apply(base, patch));
        } catch (err) {
          expectTypedRejection(err, patch, keys);
          return;
        }
        accepted++;
        expect(o.endpoints).toMatch(ENDPOINTS_RE);
        expect(o.producerGroup).toMatch(NAME_RE);
        expect(o.topics.length).toBeGreaterThan(0);
        for (const t of o.topics) expect(t).toMatch(NAME_RE);
        expect(within(o.maxMessageBytes, 1, 4 * 1024 * 1024)).toBe(true);
        expect(within(o.checkBack.concurrency, 1, 256)).toBe(true);
        expect(within(o.checkBack.lockWaitTimeoutMs, 1000, 60_000)).toBe(true);
        expect(within(o.startTimeoutMs, 100, 600_000)).toBe(true);
        expect(typeof o.sslEnabled).toBe('boolean');
        if (o.tlsCa) expect(o.sslEnabled).toBe(true);
        expect(['transactional', 'outbox']).toContain(o.delivery);
        if (o.credentials) {
          expect(typeof o.credentials.accessKey).toBe('string');
          expect(o.credentials.accessSecret.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: RUNS },
    );
    // The generator must also produce valid option sets, or the test proves nothing about acceptance.
    expect(accepted).toBeGreaterThan(RUNS / 50);
  });

  it('IdempotentConsumer options: accepted and within the rules, or a typed error naming the field', () => {
    const base = {
      endpoints: '127.0.0.1:8081',
      dataSource,
      consumerGroup: 'billing',
      subscriptions: ['orders_events'],
      handlers: [{ eventType: 'OrderPaid', eventVersion: 1, handle: async () => undefined }],
      credentials: { accessKey: 'ak', accessSecret: SECRET },
    };
    const keys = [
      'endpoints',
      'dataSource',
      'consumerGroup',
      'subscriptions',
      'handlers',
      'upcasters',
      'concurrency',
      'gapPolicy',
      'unknownEventTypes',
      'retry',
      'maxBodyBytes',
      'invisibleDurationMs',
      'longPollingMs',
      'namespace',
      'credentials',
      'sslEnabled',
      'tls',
      'requestTimeoutMs',
      'startTimeoutMs',
      'shutdownTimeoutMs',
      'onOutcome',
      'logger',
    ];
    const nested = {
      retry: ['initialDelayMs', 'maxDelayMs', 'jitterMs'],
      credentials: NESTED_CREDENTIALS,
      tls: NESTED_TLS,
    };
    let accepted = 0;
    fc.assert(
      fc.property(patchOf(keys, nested), (patch) => {
        let o;
        try {
          o = resolveConsumerOptions(apply(base, patch));
        } catch (err) {
          expectTypedRejection(err, patch, keys);
          return;
        }
        accepted++;
        expect(o.endpoints).toMatch(ENDPOINTS_RE);
        expect(o.consumerGroup).toMatch(NAME_RE);
        expect(o.subscriptions.size).toBeGreaterThan(0);
        for (const topic of o.subscriptions.keys()) expect(topic).toMatch(NAME_RE);
        expect(within(o.concurrency, 1, Number.MAX_SAFE_INTEGER)).toBe(true);
        expect(within(o.invisibleDurationMs, 10_000, Number.MAX_SAFE_INTEGER)).toBe(true);
        expect(['hold', 'accept']).toContain(o.gapPolicy);
      }),
      { numRuns: RUNS },
    );
    expect(accepted).toBeGreaterThan(RUNS / 50);
  });

  it('OutboxRelay options: accepted and within the rules, or a typed error naming the field', () => {
    const base = {
      endpoints: '127.0.0.1:8081',
      dataSource,
      topics: ['orders_events', 'orders_tx'],
      transactionTopics: ['orders_tx'],
      credentials: { accessKey: 'ak', accessSecret: SECRET },
    };
    const keys = [
      'endpoints',
      'dataSource',
      'topics',
      'transactionTopics',
      'fifoTopics',
      'relayId',
      'batchSize',
      'leaseMs',
      'pollIntervalMs',
      'maxAttempts',
      'backoff',
      'discardHorizonMs',
      'reconcileIntervalMs',
      'reconcileDiscarded',
      'namespace',
      'credentials',
      'sslEnabled',
      'tls',
      'requestTimeoutMs',
      'startTimeoutMs',
      'shutdownTimeoutMs',
      'logger',
      'retry',
      'onOutcome',
    ];
    const nested = {
      backoff: ['baseMs', 'baseDelayMs', 'maxDelayMs', 'jitter', 'jitterMs'],
      retry: ['initialDelayMs', 'maxDelayMs', 'jitterMs', 'baseMs'],
      credentials: NESTED_CREDENTIALS,
      tls: NESTED_TLS,
    };
    let accepted = 0;
    fc.assert(
      fc.property(patchOf(keys, nested), (patch) => {
        let o;
        try {
          o = resolveRelayOptions(apply(base, patch));
        } catch (err) {
          expectTypedRejection(err, patch, keys);
          return;
        }
        accepted++;
        expect(o.endpoints).toMatch(ENDPOINTS_RE);
        for (const t of o.topics) expect(t).toMatch(NAME_RE);
        for (const t of o.transactionTopics) expect(o.topics).toContain(t);
        expect(within(o.batchSize, 1, Number.MAX_SAFE_INTEGER)).toBe(true);
        expect(within(o.maxAttempts, 1, Number.MAX_SAFE_INTEGER)).toBe(true);
      }),
      { numRuns: RUNS },
    );
    expect(accepted).toBeGreaterThan(RUNS / 50);
  });
});
