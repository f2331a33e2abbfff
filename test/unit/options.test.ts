import { InvalidOptionError, TransactionalProducer } from '../../src';
import { resolveProducerOptions } from '../../src/producer/options';
import { resolveConsumerOptions } from '../../src/consumer/options';
import { resolveRelayOptions } from '../../src/relay/options';
import { CONNECTION_OPTION_KEYS, type ResolvedConnection } from '../../src/util/clientOptions';
import { fakeDataSource, Journal } from './fakes/fakes';

const base = () => ({
  endpoints: '127.0.0.1:8081',
  dataSource: fakeDataSource(new Journal()),
  producerGroup: 'orders',
  topics: ['orders_tx'],
});

function errorOf(patch: Record<string, unknown>): InvalidOptionError {
  try {
    resolveProducerOptions({ ...base(), ...patch });
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError);
    return err as InvalidOptionError;
  }
  throw new Error(`expected ${JSON.stringify(Object.keys(patch))} to be rejected`);
}

describe('TransactionalProducer options', () => {
  it('applies documented defaults', () => {
    const o = resolveProducerOptions(base());
    expect(o.checkBack).toEqual({
      resolverScope: 'without-tx-id',
      concurrency: 4,
      maxQueued: 256,
      lockWaitTimeoutMs: 2000,
    });
    expect(o).toMatchObject({
      namespace: '',
      sslEnabled: false,
      requestTimeoutMs: 3000,
      startTimeoutMs: 15000,
      shutdownTimeoutMs: 10000,
      maxMessageBytes: 4 * 1024 * 1024,
    });
  });

  it.each([
    [{ endpoints: '' }, 'endpoints', '""'],
    [{ endpoints: 'http://127.0.0.1:8081' }, 'endpoints', '"http://127.0.0.1:8081"'],
    [{ dataSource: {} }, 'dataSource', 'object'],
    [{ producerGroup: 'has space' }, 'producerGroup', '"has space"'],
    [{ producerGroup: undefined }, 'producerGroup', 'undefined'],
    [{ topics: [] }, 'topics', 'array of length 0'],
    [{ topics: ['ok', 'bad topic'] }, 'topics[1]', '"bad topic"'],
    [{ checkBack: { concurrency: 0 } }, 'checkBack.concurrency', '0'],
    [{ checkBack: { concurrency: 2.5 } }, 'checkBack.concurrency', '2.5'],
    [{ checkBack: { lockWaitTimeoutMs: 500 } }, 'checkBack.lockWaitTimeoutMs', '500'],
    [{ checkBack: { resolverScope: 'some' } }, 'checkBack.resolverScope', '"some"'],
    [{ checkBack: { resolverScope: 'all' } }, 'checkBack.resolver', 'undefined'],
    [{ checkBack: { resolver: { check: () => 1 } } }, 'checkBack.resolver.resolve', 'undefined'],
    [{ checkBack: { concurency: 2 } }, 'checkBack.concurency', '2'],
    [{ sslEnabled: 'yes' }, 'sslEnabled', '"yes"'],
    [{ requestTimeoutMs: -1 }, 'requestTimeoutMs', '-1'],
    [{ maxMessageBytes: 5 * 1024 * 1024 }, 'maxMessageBytes', '5242880'],
    [{ logger: { info: () => undefined } }, 'logger.debug', 'undefined'],
    [{ credentials: { accessKey: 'ak' } }, 'credentials.accessSecret', '(hidden)'],
    [{ topic: 'typo' }, 'options.topic', '"typo"'],
  ])('rejects %j naming %s and the value', (patch, option, shown) => {
    const err = errorOf(patch);
    expect(err.option).toBe(option);
    expect(err.code).toBe('INVALID_OPTION');
    expect(err.retriable).toBe(false);
    expect(err.message).toContain(option);
    expect(err.message).toContain(shown);
    expect(err.message).toMatch(/expected .+/);
  });

  it('never echoes a secret in an error', () => {
    const err = errorOf({ credentials: { accessKey: 'ak', accessSecret: 12345 } });
    expect(err.message).not.toContain('12345');
  });

  it('the constructor validates before anything connects', () => {
    expect(() => new TransactionalProducer({ ...base(), topics: 'orders_tx' } as never)).toThrow(
      InvalidOptionError,
    );
  });
});

describe('ConnectionOptions: one resolver for producer, consumer and relay', () => {
  const ds = fakeDataSource(new Journal());
  const resolvers: Array<[string, (patch: Record<string, unknown>) => unknown]> = [
    ['producer', (p) => resolveProducerOptions({ ...base(), ...p })],
    [
      'consumer',
      (p) =>
        resolveConsumerOptions({
          endpoints: '127.0.0.1:8081',
          dataSource: ds,
          consumerGroup: 'g',
          subscriptions: ['t'],
          handlers: [{ eventType: 'E', eventVersion: 1, handle: async () => undefined }],
          ...p,
        }),
    ],
    [
      'relay',
      (p) => resolveRelayOptions({ endpoints: '127.0.0.1:8081', dataSource: ds, topics: ['t'], ...p }),
    ],
  ];

  it.each(resolvers)('%s takes every connection option under the same name', (_n, resolve) => {
    const o = resolve({
      namespace: 'ns',
      credentials: { accessKey: 'ak', accessSecret: 'sk' },
      tls: true,
      requestTimeoutMs: 2000,
      startTimeoutMs: 3000,
      shutdownTimeoutMs: 4000,
    }) as ResolvedConnection;
    expect(o).toMatchObject({
      endpoints: '127.0.0.1:8081',
      namespace: 'ns',
      credentials: { accessKey: 'ak', accessSecret: 'sk' },
      sslEnabled: true,
      requestTimeoutMs: 2000,
      startTimeoutMs: 3000,
      shutdownTimeoutMs: 4000,
    });
    for (const key of CONNECTION_OPTION_KEYS) expect(() => resolve({ [key]: Symbol('bad') })).toThrow(key);
  });

  it('the same bad connection option gives the same error on all three', () => {
    for (const patch of [
      { endpoints: 'host:1:2' },
      { requestTimeoutMs: 50 },
      { tls: { ca: 'nope' } },
      { sslEnabled: 'yes' },
      { credentials: { accessKey: 'ak', accessSecret: 7 } },
    ]) {
      const errors = resolvers.map(([, resolve]) => {
        try {
          resolve(patch);
        } catch (err) {
          return err as InvalidOptionError;
        }
        throw new Error(`${JSON.stringify(patch)} accepted`);
      });
      const [first, ...rest] = errors;
      for (const e of rest) {
        expect(e).toBeInstanceOf(InvalidOptionError);
        expect({ option: e.option, allowed: e.allowed, message: e.message }).toEqual({
          option: first!.option,
          allowed: first!.allowed,
          message: first!.message,
        });
      }
    }
  });

  it('InvalidOptionError carries option, value, allowed and range; a secret value stays hidden', () => {
    const err = errorOf({ requestTimeoutMs: 50 });
    expect(err).toMatchObject({
      option: 'requestTimeoutMs',
      value: 50,
      allowed: 'an integer from 100 to 120000',
      expected: 'an integer from 100 to 120000',
      range: { min: 100, max: 120_000 },
    });
    expect(Object.keys(err)).not.toContain('value');
    const secret = errorOf({ credentials: { accessKey: 'ak', accessSecret: 12345 } });
    expect(secret.value).toBe('(hidden)');
    expect(JSON.stringify(secret)).not.toContain('12345');
    expect(errorOf({ delivery: 'x' }).range).toBeUndefined();
  });
});
