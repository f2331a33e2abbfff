/**
 * rocketmq-tx/nestjs without a broker: option checks, handler discovery, lifecycle order and
 * metrics registration. The components' start/shutdown are spied on (they would connect); the
 * integration test samples/nestjs-order-service runs the module for real.
 */
import 'reflect-metadata';
import { Injectable, Module, Scope } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Registry } from 'prom-client';
import { DataSource } from 'typeorm';
import {
  IdempotentConsumer,
  InvalidOptionError,
  OutboxRelay,
  RocketMqTxMetrics,
  TransactionalProducer,
  defineEvent,
  type Envelope,
  type HandlerContext,
} from '../../src';
import { RocketMqTxHandler, RocketMqTxModule, type RocketMqTxModuleOptions } from '../../src/nestjs';

const dataSource = new DataSource({ type: 'mysql', host: '127.0.0.1' });
const ENDPOINTS = '127.0.0.1:1';
const OrderCreated = defineEvent<{ orderId: string }>({
  eventType: 'OrderCreated',
  eventVersion: 1,
  aggregateType: 'Order',
  validate: (d) => (typeof (d as { orderId?: unknown })?.orderId === 'string' ? undefined : 'orderId'),
});

const calls: string[] = [];
beforeEach(() => {
  calls.length = 0;
  for (const [name, cls] of [
    ['producer', TransactionalProducer],
    ['relay', OutboxRelay],
    ['consumer', IdempotentConsumer],
  ] as const) {
    jest.spyOn(cls.prototype, 'start').mockImplementation(async () => void calls.push(`${name}.start`));
    jest.spyOn(cls.prototype, 'shutdown').mockImplementation(async () => void calls.push(`${name}.shutdown`));
  }
});
afterEach(() => jest.restoreAllMocks());

@Injectable()
class Inventory {
  readonly seen: Array<{ self: unknown; event: Envelope; group: string }> = [];
  onModuleInit(): void {
    calls.push('app.onModuleInit');
  }
  onApplicationBootstrap(): void {
    calls.push('app.onApplicationBootstrap');
  }
  @RocketMqTxHandler(OrderCreated)
  async reserve(event: Envelope<{ orderId: string }>, ctx: HandlerContext): Promise<void> {
    this.seen.push({ self: this, event, group: ctx.consumerGroup });
  }
  @RocketMqTxHandler({ eventType: 'OrderCancelled', eventVersion: 2 })
  async release(): Promise<void> {}
}

const producer = { endpoints: ENDPOINTS, producerGroup: 'pg', topics: ['tx'], dataSource };
const relay = { endpoints: ENDPOINTS, topics: ['tx'], dataSource };
const consumer = { endpoints: ENDPOINTS, consumerGroup: 'cg', subscriptions: ['events'], dataSource };

async function boot(
  options: RocketMqTxModuleOptions,
  providers: Array<new (...a: never[]) => unknown> = [Inventory],
) {
  @Module({ imports: [RocketMqTxModule.forRoot(options)], providers })
  class AppModule {}
  return NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
}

function registryOf(consumer: IdempotentConsumer) {
  return (
    consumer as unknown as {
      options: {
        registry: {
          resolve(e: Envelope): {
            kind: string;
            handler?: { handle: (e: Envelope, c: unknown) => Promise<void>; validate?: unknown };
          };
        };
      };
    }
  ).options.registry;
}

describe('RocketMqTxModule', () => {
  it('starts producer and relay on module init, the consumer on bootstrap, and drains consumer, relay, producer on close', async () => {
    const app = await boot({ producer, relay, consumer, metrics: false });
    expect(calls).toEqual([
      'producer.start',
      'relay.start',
      'app.onModuleInit',
      'consumer.start',
      'app.onApplicationBootstrap',
    ]);
    expect(app.get(TransactionalProducer)).toBeInstanceOf(TransactionalProducer);
    expect(app.get(OutboxRelay)).toBeInstanceOf(OutboxRelay);
    expect(app.get(IdempotentConsumer)).toBeInstanceOf(IdempotentConsumer);
    calls.length = 0;
    await app.close();
    expect(calls).toEqual(['consumer.shutdown', 'relay.shutdown', 'producer.shutdown']);
  });

  it("binds every @RocketMqTxHandler() method to the provider instance, with the definition's validator", async () => {
    const app = await boot({ consumer, metrics: false });
    try {
      const inventory = app.get(Inventory);
      const registry = registryOf(app.get(IdempotentConsumer));
      const envelope = OrderCreated.create({
        aggregateId: 'o-1',
        aggregateVersion: 1,
        data: { orderId: 'o-1' },
      });
      const resolved = registry.resolve(envelope);
      expect(resolved.kind).toBe('handler');
      expect(resolved.handler!.validate).toBe(OrderCreated.validate);
      await resolved.handler!.handle(envelope, { consumerGroup: 'cg' });
      expect(inventory.seen).toHaveLength(1);
      expect(inventory.seen[0]!.self).toBe(inventory);
      expect(inventory.seen[0]!.event).toBe(envelope);
      const cancelled = { ...envelope, eventType: 'OrderCancelled', eventVersion: 2 };
      expect(registry.resolve(cancelled).kind).toBe('handler');
      expect(registry.resolve({ ...envelope, eventType: 'Other' }).kind).toBe('unknown-type');
      // Unconfigured components are provided as null.
      expect(app.get(TransactionalProducer)).toBeNull();
      expect(app.get(OutboxRelay)).toBeNull();
      expect(app.get(RocketMqTxMetrics)).toBeNull();
    } finally {
      await app.close();
    }
  });

  it('builds from forRootAsync with injected values', async () => {
    @Module({ providers: [{ provide: 'DS', useValue: dataSource }], exports: ['DS'] })
    class DbModule {}
    @Module({
      imports: [
        RocketMqTxModule.forRootAsync({
          imports: [DbModule],
          inject: ['DS'],
          useFactory: async (ds: DataSource) => ({
            producer: { ...producer, dataSource: ds },
            metrics: false,
          }),
        }),
      ],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    expect(app.get(TransactionalProducer)).toBeInstanceOf(TransactionalProducer);
    expect(app.get(IdempotentConsumer)).toBeNull();
    await app.close();
    expect(calls).toEqual(['producer.start', 'producer.shutdown']);
  });

  it('registers the metrics on the given registry and removes them on close', async () => {
    const register = new Registry();
    const app = await boot({ producer, consumer, metrics: { register } });
    expect(app.get(RocketMqTxMetrics)).toBeInstanceOf(RocketMqTxMetrics);
    expect(register.getSingleMetric('rocketmq_tx_transactions_total')).toBeDefined();
    expect(register.getSingleMetric('rocketmq_tx_consumer_messages_total')).toBeDefined();
    await app.close();
    expect(register.getMetricsAsArray()).toEqual([]);
  });

  it("registers on prom-client's default registry when metrics is not set (prom-client installed)", async () => {
    const { register } = await import('prom-client');
    const app = await boot({ producer }, []);
    try {
      expect(register.getSingleMetric('rocketmq_tx_transactions_total')).toBeDefined();
    } finally {
      await app.close();
    }
    expect(register.getSingleMetric('rocketmq_tx_transactions_total')).toBeUndefined();
  });

  describe('options', () => {
    const invalid = async (options: unknown, providers: Array<new (...a: never[]) => unknown> = []) => {
      const err = await boot(options as RocketMqTxModuleOptions, providers).then(
        async (app) => {
          await app.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidOptionError);
      return err as InvalidOptionError;
    };

    it('names a bad option by its path in the module options', async () => {
      expect((await invalid({ producer: { ...producer, producerGroup: 'bad group' } })).option).toBe(
        'producer.producerGroup',
      );
      expect((await invalid({ relay: { ...relay, batchSize: 0 } })).option).toBe('relay.batchSize');
      expect((await invalid({ consumer: { ...consumer, concurrency: -1 } }, [Inventory])).option).toBe(
        'consumer.concurrency',
      );
      expect((await invalid({ producer, metrics: 'yes' })).option).toBe('metrics');
      expect((await invalid({ producer, metrics: { durationBuckets: [2, 1] } })).option).toBe(
        'metrics.durationBuckets',
      );
      expect((await invalid({ producer, extra: 1 })).option).toBe('options.extra');
      expect((await invalid({ producer: 'x' })).option).toBe('producer');
    });

    it('refuses a module with no component, and handlers without a consumer', async () => {
      expect((await invalid({ metrics: false }, [])).option).toBe('options');
      const err = await invalid({ producer, metrics: false }, [Inventory]);
      expect(err.option).toBe('consumer');
      expect(err.message).toContain('Inventory.reserve');
    });

    it('refuses two handlers of one (eventType, eventVersion)', async () => {
      @Injectable()
      class Twice {
        @RocketMqTxHandler(OrderCreated)
        async again(): Promise<void> {}
      }
      const err = await invalid({ consumer, metrics: false }, [Inventory, Twice]);
      expect(err.message).toMatch(/one handler per \(eventType, eventVersion\)/);
      expect(err.option).toMatch(/^@RocketMqTxHandler\(\) on (Twice\.again|Inventory\.reserve)$/);
    });

    it('refuses a handler on a request-scoped provider', async () => {
      @Injectable({ scope: Scope.REQUEST })
      class PerRequest {
        @RocketMqTxHandler({ eventType: 'X', eventVersion: 1 })
        async handle(): Promise<void> {}
      }
      const err = await invalid({ consumer, metrics: false }, [PerRequest]);
      expect(err.option).toBe('@RocketMqTxHandler() on PerRequest.handle');
    });

    it("checks the decorator's declaration when the class is defined", () => {
      expect(() => RocketMqTxHandler({ eventType: '', eventVersion: 1 })).toThrow(InvalidOptionError);
      expect(() => RocketMqTxHandler({ eventType: 'A', eventVersion: 0 })).toThrow(
        expect.objectContaining({ option: '@RocketMqTxHandler().eventVersion' }),
      );
      expect(() => RocketMqTxHandler(null as never)).toThrow(InvalidOptionError);
    });

    it("checks forRootAsync's own options", () => {
      expect(() => RocketMqTxModule.forRootAsync({} as never)).toThrow(
        expect.objectContaining({ option: 'forRootAsync options.useFactory' }),
      );
      expect(() => RocketMqTxModule.forRootAsync({ useFactory: () => ({}), inject: 'DS' as never })).toThrow(
        InvalidOptionError,
      );
    });
  });
});
