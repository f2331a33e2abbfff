import type { DataSource } from 'typeorm';
import {
  optionalCredentials,
  requireDataSource,
  requireEndpoints,
  RESOURCE_NAME_RE,
  RESOURCE_NAME_RULE,
  requireResourceName,
  resolveTls,
  type Credentials,
  type TlsOption,
} from '../util/clientOptions';
import { InvalidOptionError } from '../errors';

import { noopLogger, type Logger } from '../util/logger';
import {
  optionalFunctionsOf,
  optionalInt,
  optionalObject,
  optionalString,
  rejectUnknownKeys,
  requireObject,
  requireString,
} from '../util/validate';
import { HandlerRegistry, type EventHandler, type Upcaster } from './handlers';
import type { ConsumeOutcome } from './outcome';

export type GapPolicy = 'hold' | 'accept';
export type UnknownEventTypePolicy = 'retry' | 'ignore';

export interface Subscription {
  topic: string;
  /** Tag filter expression, e.g. "created||paid". Default "*". */
  tag?: string;
}

export interface ConsumerRetryOptions {
  /** Delay before the first redelivery of a failed or held message. Default 1000 ms. */
  initialDelayMs?: number;
  /** Upper bound of the doubling delay. Default 60000 ms. */
  maxDelayMs?: number;
}

export interface IdempotentConsumerOptions {
  /** RocketMQ 5 proxy gRPC endpoints: "host:port" or "host1:port;host2:port". */
  endpoints: string;
  /** A TypeORM DataSource you own and have initialized (MySQL or MariaDB). */
  dataSource: DataSource;
  /** The consumer group; every instance of one service uses the same one. */
  consumerGroup: string;
  /** Topics (and tag filters) to consume. */
  subscriptions: ReadonlyArray<string | Subscription>;
  /** One handler per (eventType, eventVersion). */
  handlers: readonly EventHandler[];
  /** Turn older contract versions into the versions handlers accept, one step at a time. */
  upcasters?: readonly Upcaster[];
  /** Messages handled at once on this instance (each holds one DB connection). Default 8. */
  concurrency?: number;
  /** Out-of-order versions: 'hold' (default: no ack, redeliver until the gap fills) or 'accept'. */
  gapPolicy?: GapPolicy;
  /** Events whose eventType has no handler: 'retry' (default, like an unknown version) or 'ignore' (acked, counted). */
  unknownEventTypes?: UnknownEventTypePolicy;
  retry?: ConsumerRetryOptions;
  /** Bodies larger than this are malformed (dead-lettered unparsed). Default 1 MiB. */
  maxBodyBytes?: number;
  /** How long a received message stays invisible to other consumers while handled. Default 30000 ms (min 10000). */
  invisibleDurationMs?: number;
  /** Long polling per receive. Default 5000 ms (the proxy's minimum). */
  longPollingMs?: number;
  namespace?: string;
  /** ACL 2.0 user of the broker; the secret signs each request and is never logged. */
  credentials?: Credentials;
  /**
   * TLS to the proxy: `true` trusts the system CAs, `{ caFile }` / `{ ca }` trusts only that CA.
   * Default plaintext.
   */
  tls?: TlsOption;
  /** Older spelling of `tls: true`. */
  sslEnabled?: boolean;
  /** Per-RPC timeout towards the proxy. Default 3000 ms. */
  requestTimeoutMs?: number;
  /** Upper bound for start(). Default 15000 ms. */
  startTimeoutMs?: number;
  /** Upper bound for shutdown() to finish in-flight handlers and close the client. Default 30000 ms. */
  shutdownTimeoutMs?: number;
  /** Called after every settled message (metrics, audit). Must not throw; errors are logged. */
  onOutcome?: (outcome: ConsumeOutcome) => void;
  logger?: Logger;
}

export interface ResolvedConsumerOptions {
  endpoints: string;
  dataSource: DataSource;
  consumerGroup: string;
  subscriptions: ReadonlyMap<string, string>;
  registry: HandlerRegistry;
  concurrency: number;
  gapPolicy: GapPolicy;
  unknownEventTypes: UnknownEventTypePolicy;
  retry: Required<ConsumerRetryOptions>;
  maxBodyBytes: number;
  invisibleDurationMs: number;
  longPollingMs: number;
  namespace: string;
  credentials?: Credentials;
  sslEnabled: boolean;
  /** Custom CA (PEM) to trust instead of the system CAs. */
  tlsCa?: Buffer;
  requestTimeoutMs: number;
  startTimeoutMs: number;
  shutdownTimeoutMs: number;
  onOutcome?: (outcome: ConsumeOutcome) => void;
  logger: Logger;
}

const KNOWN = [
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
] as const;

export function resolveConsumerOptions(input: unknown): ResolvedConsumerOptions {
  const o = requireObject('options', input);
  rejectUnknownKeys('options', o, KNOWN);
  const endpoints = requireEndpoints(o.endpoints);
  const dataSource = requireDataSource(o.dataSource);
  const consumerGroup = requireResourceName('consumerGroup', o.consumerGroup);
  const subscriptions = resolveSubscriptions(o.subscriptions);
  const registry = new HandlerRegistry(o.handlers, o.upcasters);
  const gapPolicy = o.gapPolicy ?? 'hold';
  if (gapPolicy !== 'hold' && gapPolicy !== 'accept') {
    throw new InvalidOptionError('gapPolicy', gapPolicy, '"hold" or "accept"');
  }
  const unknownEventTypes = o.unknownEventTypes ?? 'retry';
  if (unknownEventTypes !== 'retry' && unknownEventTypes !== 'ignore') {
    throw new InvalidOptionError('unknownEventTypes', unknownEventTypes, '"retry" or "ignore"');
  }
  const r = optionalObject('retry', o.retry);
  rejectUnknownKeys('retry', r, ['initialDelayMs', 'maxDelayMs']);
  const initialDelayMs = optionalInt('retry.initialDelayMs', r.initialDelayMs, 1000, 0, 3_600_000);
  const maxDelayMs = optionalInt('retry.maxDelayMs', r.maxDelayMs, 60_000, initialDelayMs, 7_200_000);
  if (o.onOutcome !== undefined && typeof o.onOutcome !== 'function') {
    throw new InvalidOptionError('onOutcome', o.onOutcome, 'a function');
  }
  const credentials = optionalCredentials(o.credentials);
  const logger =
    optionalFunctionsOf<Logger>('logger', o.logger, ['debug', 'info', 'warn', 'error']) ?? noopLogger;
  return {
    endpoints,
    dataSource,
    consumerGroup,
    subscriptions,
    registry,
    concurrency: optionalInt('concurrency', o.concurrency, 8, 1, 256),
    gapPolicy,
    unknownEventTypes,
    retry: { initialDelayMs, maxDelayMs },
    maxBodyBytes: optionalInt('maxBodyBytes', o.maxBodyBytes, 1024 * 1024, 64, 4 * 1024 * 1024),
    invisibleDurationMs: optionalInt(
      'invisibleDurationMs',
      o.invisibleDurationMs,
      30_000,
      10_000,
      43_200_000,
    ),
    longPollingMs: optionalInt('longPollingMs', o.longPollingMs, 5000, 5000, 60_000),
    namespace: optionalString('namespace', o.namespace, '', { pattern: RESOURCE_NAME_RE }),
    ...(credentials ? { credentials } : {}),
    ...resolveTls(o.tls, o.sslEnabled),
    requestTimeoutMs: optionalInt('requestTimeoutMs', o.requestTimeoutMs, 3000, 100, 120_000),
    startTimeoutMs: optionalInt('startTimeoutMs', o.startTimeoutMs, 15_000, 100, 600_000),
    shutdownTimeoutMs: optionalInt('shutdownTimeoutMs', o.shutdownTimeoutMs, 30_000, 0, 600_000),
    ...(o.onOutcome ? { onOutcome: o.onOutcome as (outcome: ConsumeOutcome) => void } : {}),
    logger,
  };
}

function resolveSubscriptions(value: unknown): ReadonlyMap<string, string> {
  if (!Array.isArray(value) || value.length === 0) {
    throw new InvalidOptionError(
      'subscriptions',
      value,
      'a non-empty array of topic names or { topic, tag }',
    );
  }
  const out = new Map<string, string>();
  // Array.from: a hole in a sparse array is checked as undefined, not skipped.
  Array.from(value).forEach((s: unknown, i) => {
    const path = `subscriptions[${i}]`;
    const sub = typeof s === 'string' ? { topic: s } : requireObject(path, s);
    if (typeof s !== 'string') rejectUnknownKeys(path, sub, ['topic', 'tag']);
    const topic = requireString(typeof s === 'string' ? path : `${path}.topic`, sub.topic, {
      pattern: RESOURCE_NAME_RE,
      describe: `a topic ${RESOURCE_NAME_RULE}`,
    });
    const tag = optionalString(`${path}.tag`, sub.tag, '*', { maxLength: 1024 });
    if (out.has(topic)) throw new InvalidOptionError(path, topic, 'each topic once');
    out.set(topic, tag);
  });
  return out;
}
