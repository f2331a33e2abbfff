import * as fs from 'node:fs';
import * as path from 'node:path';
import type { DataSource } from 'typeorm';
import { InvalidOptionError } from '../../errors';
import type { IdempotentConsumerOptions } from '../../consumer/options';
import type { TransactEvent } from '../../outbox/events';
import type { TransactionalProducer } from '../../producer/TransactionalProducer';

/** What one business transaction learns from the runner. */
export interface ChaosContext {
  /** The topic the runner's producer declares (pass it to your service as its topic). */
  readonly topic: string;
  /** 0, 1, 2, ... per process. */
  readonly sequence: number;
}

/**
 * The module `rocketmq-tx chaos --module <path>` loads (its default export, or the module
 * itself), in the runner and in every process it kills.
 */
export interface ChaosProducerTarget {
  /** Opens your DataSource (initialized, with the SDK's entities and yours). Once per process. */
  dataSource(): Promise<DataSource>;
  /** Runs once in the runner before the first process is forked (migrations, seed rows). */
  prepare?(dataSource: DataSource): Promise<void>;
  /**
   * Runs ONE business transaction of your service through `producer` (transact, or publish
   * inside your own transaction). Throwing is fine: a business rollback is part of the test.
   */
  transaction(producer: TransactionalProducer, context: ChaosContext): Promise<unknown>;
}

/** The module `rocketmq-tx chaos --consumer --module <path>` loads. */
export interface ChaosConsumerTarget {
  /** Opens your DataSource (initialized, with the SDK's entities and yours). Once per process. */
  dataSource(): Promise<DataSource>;
  /** Runs once in the runner before the first process is forked (migrations, seed rows). */
  prepare?(dataSource: DataSource): Promise<void>;
  /** Your consumer's handlers and settings (the runner adds endpoints, dataSource, group and subscriptions). */
  consumerOptions(): Omit<
    IdempotentConsumerOptions,
    'endpoints' | 'dataSource' | 'consumerGroup' | 'subscriptions'
  >;
  /** The n-th event the runner publishes to `topic` (an envelope event your handlers take). */
  event(n: number, topic: string): TransactEvent;
  /** How many times the effect of each event is in your database (0 = not applied). */
  effects(dataSource: DataSource, eventIds: readonly string[]): Promise<Map<string, number>>;
}

/** The functions a consumer target must export. */
export const CONSUMER_TARGET_FUNCTIONS = ['dataSource', 'consumerOptions', 'event', 'effects'] as const;

/** Resolves a module path against the working directory; it must exist. */
export function resolveModulePath(option: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidOptionError(option, value, 'a path to a .js or .ts module');
  }
  const abs = path.resolve(value);
  if (!fs.existsSync(abs)) throw new InvalidOptionError(option, value, 'the path of an existing module');
  return abs;
}

/** The ts-node register hook, when `file` is TypeScript (undefined for JavaScript). */
export function tsNodeHook(file: string): string | undefined {
  if (!/\.[cm]?tsx?$/.test(file)) return undefined;
  try {
    return require.resolve('ts-node/register/transpile-only', { paths: [process.cwd(), __dirname] });
  } catch {
    throw new InvalidOptionError('module', file, 'a .js module (or install ts-node to load a .ts module)');
  }
}

/** Loads a target module (registering ts-node for a .ts module) and checks its functions. */
export function loadTarget<T>(file: string, functions: readonly string[]): T {
  const hook = tsNodeHook(file);
  if (hook && !(process as unknown as Record<symbol, unknown>)[Symbol.for('ts-node.register.instance')]) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require(hook);
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const mod = require(file) as Record<string, unknown>;
  const target = (mod.default && typeof mod.default === 'object' ? mod.default : mod) as Record<
    string,
    unknown
  >;
  for (const name of functions) {
    if (typeof target[name] !== 'function') {
      throw new InvalidOptionError(
        'module',
        file,
        `a module exporting ${functions.map((f) => `${f}()`).join(', ')} (missing ${name})`,
      );
    }
  }
  return target as T;
}
