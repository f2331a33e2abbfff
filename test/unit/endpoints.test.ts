import { IdempotentConsumer, InvalidOptionError, OutboxRelay, TransactionalProducer } from '../../src';
import { resolveConsumerOptions } from '../../src/consumer/options';
import { resolveProducerOptions } from '../../src/producer/options';
import { resolveRelayOptions } from '../../src/relay/options';
import { requireEndpoints } from '../../src/util/validate';
import { fakeDataSource, Journal } from './fakes/fakes';

type Build = (endpoints: string) => unknown;

const dataSource = () => fakeDataSource(new Journal()) as never;

const producer = (endpoints: string) => ({
  endpoints,
  dataSource: dataSource(),
  producerGroup: 'g',
  topics: ['t'],
});
const consumer = (endpoints: string) => ({
  endpoints,
  dataSource: dataSource(),
  consumerGroup: 'g',
  subscriptions: ['t'],
  handlers: [{ eventType: 'E', eventVersion: 1, handle: async () => undefined }],
});
const relay = (endpoints: string) => ({ endpoints, dataSource: dataSource(), topics: ['t'] });

// [name, the constructor (refusals happen before it builds a RocketMQ client), its option resolver]
const components: [string, Build, Build][] = [
  [
    'TransactionalProducer',
    (e) => new TransactionalProducer(producer(e)),
    (e) => resolveProducerOptions(producer(e)),
  ],
  [
    'IdempotentConsumer',
    (e) => new IdempotentConsumer(consumer(e)),
    (e) => resolveConsumerOptions(consumer(e)),
  ],
  ['OutboxRelay', (e) => new OutboxRelay(relay(e)), (e) => resolveRelayOptions(relay(e))],
];

function refusal(build: Build, endpoints: string): InvalidOptionError {
  try {
    build(endpoints);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError);
    return err as InvalidOptionError;
  }
  throw new Error(`endpoints ${JSON.stringify(endpoints)} were accepted`);
}

describe.each(components)('%s endpoints', (_name, build, resolve) => {
  it.each([
    ['127.0.0.1:0', '0'],
    ['127.0.0.1:65536', '65536'],
    ['127.0.0.1:abc', 'abc'],
    ['a:8081;b:99999', '99999'],
    ['a:8081;b:', ''],
  ])('refuses %s naming the port', (endpoints, port) => {
    const err = refusal(build, endpoints);
    expect(err.option).toBe('endpoints');
    expect(err.code).toBe('INVALID_OPTION');
    expect(err.message).toContain(`port "${port}"`);
    expect(err.message).toContain(JSON.stringify(endpoints));
  });

  it.each(['h:1', 'proxy.local:65535', 'a:8081;b:8082', 'localhost'])('accepts %s', (endpoints) => {
    expect(resolve(endpoints)).toMatchObject({ endpoints });
  });
});

describe('requireEndpoints', () => {
  it.each(['', 'http://h:8081', 'h:1,h:2', 'h:1:2', ' h:1', 'h:1;;h:2'])('refuses %j as malformed', (v) => {
    expect(() => requireEndpoints(v)).toThrow(InvalidOptionError);
  });

  it('names the option it validates', () => {
    expect(() => requireEndpoints('h:0', 'broker.endpoints')).toThrow(/Invalid option broker\.endpoints/);
  });
});
