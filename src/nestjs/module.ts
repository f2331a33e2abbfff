import {
  Inject,
  Injectable,
  Module,
  type BeforeApplicationShutdown,
  type DynamicModule,
  type FactoryProvider,
  type ModuleMetadata,
  type OnApplicationBootstrap,
  type OnModuleInit,
  type Provider,
} from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { IdempotentConsumer } from '../consumer/IdempotentConsumer';
import type { EventHandler } from '../consumer/handlers';
import { InvalidOptionError, MissingDependencyError } from '../errors';
import { METRIC_PREFIX, RocketMqTxMetrics } from '../observability/metrics';
import { requirePromClient } from '../observability/optional';
import { TransactionalProducer } from '../producer/TransactionalProducer';
import { OutboxRelay } from '../relay/OutboxRelay';
import { errorFields } from '../util/logger';
import { declaredHandlers } from './decorator';
import { resolveModuleOptions, type ResolvedModuleOptions, type RocketMqTxModuleOptions } from './options';

/** Injection token of the module's validated options (ResolvedModuleOptions). */
export const ROCKETMQ_TX_OPTIONS = 'ROCKETMQ_TX_OPTIONS';
/** Injection token of the options as given (forRoot) or as returned by the factory (forRootAsync). */
const RAW_OPTIONS = 'ROCKETMQ_TX_RAW_OPTIONS';

/** forRoot's options: the module options, and whether the module is global. */
export interface RocketMqTxModuleRootOptions extends RocketMqTxModuleOptions {
  /** Register the module globally (its providers injectable everywhere without importing it). */
  isGlobal?: boolean;
}

/** forRootAsync's options: a factory (with its injections and imports) that returns the module options. */
export interface RocketMqTxModuleAsyncOptions {
  /** Modules whose providers the factory injects (e.g. the one providing the DataSource). */
  imports?: ModuleMetadata['imports'];
  /** Tokens injected into useFactory, in order. */
  inject?: FactoryProvider['inject'];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  useFactory: (...args: any[]) => RocketMqTxModuleOptions | Promise<RocketMqTxModuleOptions>;
  /** Register the module globally. */
  isGlobal?: boolean;
}

/** Builds a component, naming a bad option by its path in the module options (e.g. producer.producerGroup). */
function build<T>(prefix: string, make: () => T): T {
  try {
    return make();
  } catch (err) {
    if (err instanceof InvalidOptionError && !err.option.startsWith(`${prefix}.`)) {
      const option = err.option === 'options' ? prefix : `${prefix}.${err.option.replace(/^options\./, '')}`;
      throw new InvalidOptionError(option, err.value, err.allowed, err.range);
    }
    throw err;
  }
}

interface Discovered {
  handler: EventHandler;
  where: string;
}

/**
 * The provider methods decorated with @RocketMqTxHandler(), bound to their provider's instance
 * when called (the consumer is built before every instance exists; it handles nothing before
 * the application bootstraps, when they all do).
 */
function discoverHandlers(discovery: DiscoveryService, scanner: MetadataScanner): Discovered[] {
  const found: Discovered[] = [];
  const seen = new Set<unknown>();
  for (const wrapper of discovery.getProviders()) {
    const metatype = wrapper.metatype as (new (...args: never[]) => unknown) | null;
    // Class providers only: a factory's or value's class is unknown until it has run.
    if (typeof metatype !== 'function' || wrapper.inject || seen.has(metatype)) continue;
    seen.add(metatype);
    const prototype = metatype.prototype as object | undefined;
    if (!prototype) continue;
    for (const name of scanner.getAllMethodNames(prototype)) {
      const declarations = declaredHandlers(prototype, name);
      if (declarations.length === 0) continue;
      const where = `${metatype.name}.${name}`;
      if (wrapper.isTransient || !wrapper.isDependencyTreeStatic()) {
        throw new InvalidOptionError(
          `@RocketMqTxHandler() on ${where}`,
          'request-scoped or transient provider',
          'a method of a singleton (default-scoped) provider',
        );
      }
      for (const d of declarations) {
        found.push({
          where,
          handler: {
            eventType: d.eventType,
            eventVersion: d.eventVersion,
            ...(d.validate ? { validate: d.validate } : {}),
            handle: (event, context) => {
              const instance = wrapper.instance as Record<string, unknown> | undefined;
              const method = instance?.[name];
              if (typeof method !== 'function') {
                return Promise.reject(
                  new Error(`${where} is not available (the provider has no instance yet)`),
                );
              }
              return Promise.resolve().then(() =>
                (method as EventHandler['handle']).call(instance, event, context),
              );
            },
          },
        });
      }
    }
  }
  return found;
}

function buildConsumer(
  options: ResolvedModuleOptions,
  discovery: DiscoveryService,
  scanner: MetadataScanner,
): IdempotentConsumer | null {
  const discovered = discoverHandlers(discovery, scanner);
  if (!options.consumer) {
    if (discovered.length > 0) {
      throw new InvalidOptionError(
        'consumer',
        undefined,
        `consumer options: ${discovered.map((d) => d.where).join(', ')} declare @RocketMqTxHandler() but no consumer is configured`,
      );
    }
    return null;
  }
  const explicit = options.consumer.handlers ?? [];
  if (!Array.isArray(explicit)) {
    throw new InvalidOptionError(
      'consumer.handlers',
      explicit,
      'an array of { eventType, eventVersion, handle }',
    );
  }
  const owners = new Map<string, string>();
  explicit.forEach((h, i) =>
    owners.set(`${String(h?.eventType)}@${String(h?.eventVersion)}`, `consumer.handlers[${i}]`),
  );
  for (const d of discovered) {
    const key = `${d.handler.eventType}@${d.handler.eventVersion}`;
    const other = owners.get(key);
    if (other) {
      throw new InvalidOptionError(
        `@RocketMqTxHandler() on ${d.where}`,
        key,
        `one handler per (eventType, eventVersion); ${other} handles it too`,
      );
    }
    owners.set(key, d.where);
  }
  const handlers = [...explicit, ...discovered.map((d) => d.handler)];
  if (handlers.length === 0) {
    throw new InvalidOptionError(
      'consumer.handlers',
      [],
      'at least one handler: consumer.handlers or a @RocketMqTxHandler() method on a provider',
    );
  }
  options.logger.info(
    { handlers: discovered.map((d) => `${d.where} <- ${d.handler.eventType} v${d.handler.eventVersion}`) },
    'rocketmq-tx: consumer handlers discovered',
  );
  return build('consumer', () => new IdempotentConsumer({ ...options.consumer!, handlers }));
}

/** The metrics of the module's components: null when off, or 'auto' without prom-client. */
function buildMetrics(options: ResolvedModuleOptions): RocketMqTxMetrics | null {
  if (options.metrics === false) return null;
  if (options.metrics === 'auto') {
    let prom: ReturnType<typeof requirePromClient>;
    try {
      prom = requirePromClient('RocketMqTxModule metrics');
    } catch (err) {
      if (err instanceof MissingDependencyError) return null;
      throw err;
    }
    // 'auto' registers when it can: not over metrics someone already registered there.
    if (prom.register.getSingleMetric(`${METRIC_PREFIX}transactions_total`) !== undefined) {
      options.logger.warn(
        {},
        "rocketmq-tx: prom-client's default registry already has rocketmq_tx_ metrics; the module registers none (pass metrics: { register } to choose a registry)",
      );
      return null;
    }
    return build('metrics', () => new RocketMqTxMetrics({}));
  }
  return build('metrics', () => new RocketMqTxMetrics(options.metrics as Record<string, never>));
}

interface PromRegistryLike {
  getMetricsAsArray?: () => Array<{ name?: unknown }>;
  removeSingleMetric?: (name: string) => void;
}

/** Starts the components with the application and drains them when it shuts down. */
@Injectable()
export class RocketMqTxLifecycle implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown {
  private detach: Array<() => void> = [];

  constructor(
    @Inject(ROCKETMQ_TX_OPTIONS) private readonly options: ResolvedModuleOptions,
    @Inject(TransactionalProducer) private readonly producer: TransactionalProducer | null,
    @Inject(OutboxRelay) private readonly relay: OutboxRelay | null,
    @Inject(IdempotentConsumer) private readonly consumer: IdempotentConsumer | null,
    @Inject(RocketMqTxMetrics) private readonly metrics: RocketMqTxMetrics | null,
  ) {}

  /** Producer and relay start before the application's own onModuleInit hooks run (they may publish). */
  async onModuleInit(): Promise<void> {
    if (this.metrics) {
      for (const c of [this.producer, this.relay, this.consumer])
        if (c) this.detach.push(this.metrics.attach(c));
    }
    try {
      await this.producer?.start();
      await this.relay?.start();
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  /** The consumer starts once every provider's onModuleInit has run (every handler's instance is ready). */
  async onApplicationBootstrap(): Promise<void> {
    try {
      await this.consumer?.start();
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  /**
   * Drains before any onApplicationShutdown hook closes a DataSource: the consumer first (no new
   * deliveries, handled ones finish), then the relay, then the producer (running transactions
   * finish). app.close() calls it; with app.enableShutdownHooks() so do SIGTERM/SIGINT.
   */
  async beforeApplicationShutdown(): Promise<void> {
    await this.stop();
  }

  private async stop(): Promise<void> {
    for (const [name, c] of [
      ['consumer', this.consumer],
      ['relay', this.relay],
      ['producer', this.producer],
    ] as const) {
      try {
        await c?.shutdown();
      } catch (err) {
        this.options.logger.error({ component: name, ...errorFields(err) }, 'rocketmq-tx: shutdown failed');
      }
    }
    for (const d of this.detach.splice(0)) d();
    // Metrics the module registered itself leave the registry, so a new application in the same
    // process (tests, hot reload) can register them again.
    if (this.metrics) {
      const registry = this.metrics.register as unknown as PromRegistryLike;
      if (
        typeof registry.getMetricsAsArray === 'function' &&
        typeof registry.removeSingleMetric === 'function'
      ) {
        for (const m of registry.getMetricsAsArray()) {
          if (typeof m.name === 'string' && m.name.startsWith(METRIC_PREFIX))
            registry.removeSingleMetric(m.name);
        }
      }
    }
  }
}

function componentProviders(): Provider[] {
  return [
    {
      provide: ROCKETMQ_TX_OPTIONS,
      useFactory: (raw: unknown) => resolveModuleOptions(raw),
      inject: [RAW_OPTIONS],
    },
    {
      provide: TransactionalProducer,
      useFactory: (o: ResolvedModuleOptions) =>
        o.producer ? build('producer', () => new TransactionalProducer(o.producer!)) : null,
      inject: [ROCKETMQ_TX_OPTIONS],
    },
    {
      provide: OutboxRelay,
      useFactory: (o: ResolvedModuleOptions) =>
        o.relay ? build('relay', () => new OutboxRelay(o.relay!)) : null,
      inject: [ROCKETMQ_TX_OPTIONS],
    },
    {
      provide: IdempotentConsumer,
      useFactory: buildConsumer,
      inject: [ROCKETMQ_TX_OPTIONS, DiscoveryService, MetadataScanner],
    },
    {
      provide: RocketMqTxMetrics,
      useFactory: buildMetrics,
      inject: [ROCKETMQ_TX_OPTIONS],
    },
    RocketMqTxLifecycle,
  ];
}

const EXPORTS = [
  ROCKETMQ_TX_OPTIONS,
  TransactionalProducer,
  OutboxRelay,
  IdempotentConsumer,
  RocketMqTxMetrics,
];

/**
 * The SDK as a NestJS module. Provides, each under its class as injection token,
 * TransactionalProducer, OutboxRelay, IdempotentConsumer and RocketMqTxMetrics (null when the
 * component is not configured), starts them with the application (producer and relay on module
 * init, the consumer on application bootstrap, with every `@RocketMqTxHandler()` method of a
 * provider as handler) and drains them on shutdown (beforeApplicationShutdown: `app.close()`,
 * or SIGTERM with `app.enableShutdownHooks()`).
 *
 * @example
 * \@Module({ imports: [RocketMqTxModule.forRootAsync({
 *   imports: [DatabaseModule], inject: [DataSource],
 *   useFactory: (dataSource: DataSource) => ({ producer: { endpoints, producerGroup, transactionTopics, dataSource } }),
 * })] })
 * class AppModule {}
 */
@Module({})
export class RocketMqTxModule {
  /** The module with options known up front. */
  static forRoot(options: RocketMqTxModuleRootOptions): DynamicModule {
    const { isGlobal, ...rest } = (options ?? {}) as RocketMqTxModuleRootOptions;
    return {
      module: RocketMqTxModule,
      global: isGlobal === true,
      imports: [DiscoveryModule],
      providers: [{ provide: RAW_OPTIONS, useValue: rest }, ...componentProviders()],
      exports: EXPORTS,
    };
  }

  /** The module with options from a factory (e.g. one injecting the application's DataSource and config). */
  static forRootAsync(options: RocketMqTxModuleAsyncOptions): DynamicModule {
    if (typeof options !== 'object' || options === null || typeof options.useFactory !== 'function') {
      throw new InvalidOptionError(
        'forRootAsync options.useFactory',
        options?.useFactory,
        'a function returning the module options',
      );
    }
    if (options.inject !== undefined && !Array.isArray(options.inject)) {
      throw new InvalidOptionError(
        'forRootAsync options.inject',
        options.inject,
        'an array of injection tokens',
      );
    }
    if (options.imports !== undefined && !Array.isArray(options.imports)) {
      throw new InvalidOptionError('forRootAsync options.imports', options.imports, 'an array of modules');
    }
    return {
      module: RocketMqTxModule,
      global: options.isGlobal === true,
      imports: [DiscoveryModule, ...(options.imports ?? [])],
      providers: [
        { provide: RAW_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] },
        ...componentProviders(),
      ],
      exports: EXPORTS,
    };
  }
}
