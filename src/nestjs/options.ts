import { InvalidOptionError } from '../errors';
import type { EventHandler } from '../consumer/handlers';
import type { IdempotentConsumerOptions } from '../consumer/options';
import type { RocketMqTxMetricsOptions } from '../observability/metrics';
import type { TransactionalProducerOptions } from '../producer/options';
import type { OutboxRelayOptions } from '../relay/options';
import { noopLogger, type Logger } from '../util/logger';
import { optionalFunctionsOf, rejectUnknownKeys, requireObject } from '../util/validate';

/**
 * The consumer's options without `handlers` required: the module adds every provider method
 * decorated with `@RocketMqTxHandler()` to the handlers given here.
 */
export type RocketMqTxConsumerOptions = Omit<IdempotentConsumerOptions, 'handlers'> & {
  handlers?: readonly EventHandler[];
};

/** What RocketMqTxModule builds. Each component is optional; configure at least one. */
export interface RocketMqTxModuleOptions {
  /** Options of the TransactionalProducer the module provides (omit: no producer). */
  producer?: TransactionalProducerOptions;
  /** Options of the OutboxRelay the module provides (omit: no relay). */
  relay?: OutboxRelayOptions;
  /** Options of the IdempotentConsumer the module provides (omit: no consumer). */
  consumer?: RocketMqTxConsumerOptions;
  /**
   * Prometheus metrics of the components. Default: on when prom-client is installed, on
   * prom-client's default registry (the one `/metrics` endpoints such as
   * \@willsoto/nestjs-prometheus expose); `false`: none; an object: RocketMqTxMetricsOptions
   * (e.g. `{ register: appRegistry }`), prom-client then required.
   */
  metrics?: boolean | RocketMqTxMetricsOptions;
  /** pino-shaped logger for the module's own messages (bootstrap, shutdown). */
  logger?: Logger;
}

export interface ResolvedModuleOptions {
  producer?: TransactionalProducerOptions;
  relay?: OutboxRelayOptions;
  consumer?: RocketMqTxConsumerOptions;
  metrics: 'auto' | false | RocketMqTxMetricsOptions;
  logger: Logger;
}

const KNOWN = ['producer', 'relay', 'consumer', 'metrics', 'logger'];

/**
 * Checks the module's own options (the components check theirs when they are built, with
 * InvalidOptionError naming the option).
 */
export function resolveModuleOptions(input: unknown): ResolvedModuleOptions {
  const o = requireObject('options', input);
  rejectUnknownKeys('options', o, KNOWN);
  for (const key of ['producer', 'relay', 'consumer'] as const) {
    if (o[key] !== undefined) requireObject(key, o[key]);
  }
  if (o.producer === undefined && o.relay === undefined && o.consumer === undefined) {
    throw new InvalidOptionError('options', o, 'at least one of producer, relay or consumer');
  }
  let metrics: ResolvedModuleOptions['metrics'];
  if (o.metrics === undefined || o.metrics === true) metrics = o.metrics === true ? {} : 'auto';
  else if (o.metrics === false) metrics = false;
  else metrics = requireObject('metrics', o.metrics) as RocketMqTxMetricsOptions;
  const logger =
    optionalFunctionsOf<Logger>('logger', o.logger, ['debug', 'info', 'warn', 'error']) ?? noopLogger;
  return {
    ...(o.producer !== undefined ? { producer: o.producer as TransactionalProducerOptions } : {}),
    ...(o.relay !== undefined ? { relay: o.relay as OutboxRelayOptions } : {}),
    ...(o.consumer !== undefined ? { consumer: o.consumer as RocketMqTxConsumerOptions } : {}),
    metrics,
    logger,
  };
}
