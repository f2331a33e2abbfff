import type { DataSource } from 'typeorm';
import {
  optionalCredentials,
  requireDataSource,
  requireEndpoints,
  RESOURCE_NAME_RE,
  resolveTls,
  type Credentials,
  type TlsOption,
} from '../util/clientOptions';
import { InvalidOptionError } from '../errors';

import { noopLogger, type Logger } from '../util/logger';
import {
  optionalBoolean,
  optionalFunctionsOf,
  optionalInt,
  optionalObject,
  optionalString,
  rejectUnknownKeys,
  requireObject,
  requireString,
} from '../util/validate';
import type { BackoffPolicy } from './backoff';

export interface OutboxRelayOptions {
  /** RocketMQ 5 proxy gRPC endpoints, as for the producer. */
  endpoints: string;
  /** The same database the producers write outbox_event to (initialized). */
  dataSource: DataSource;
  /** The topics this relay delivers (only rows of these topics are taken); declared at start. */
  topics: readonly string[];
  /**
   * Topics of message type TRANSACTION: the proxy refuses a normal message there, so the relay
   * delivers with a half message committed at once (same eventId, TX_ID and keys).
   */
  transactionTopics?: readonly string[];
  /** Topics of message type FIFO: messages get messageGroup = aggregateId (or txId for body events). */
  fifoTopics?: readonly string[];
  /** Identifies this relay's leases. Default: host pid + random suffix. */
  relayId?: string;
  /** Rows taken per short claim transaction. Default 100. */
  batchSize?: number;
  /** How long a claimed row is ours; a relay that dies loses its rows after this. Default 30000 ms. */
  leaseMs?: number;
  /** Wait between polls when the last batch was not full. Default 500 ms. */
  pollIntervalMs?: number;
  /** Tries before a row becomes DEAD (with its last error; never SENT). Default 10. */
  maxAttempts?: number;
  backoff?: Partial<BackoffPolicy>;
  /**
   * Discard reconciliation: IN_FLIGHT events older than this, whose tx_record is COMMITTED and
   * whose broker commit was never confirmed, are republished. Must exceed the broker's check-back
   * horizon (transactionTimeOut + transactionCheckMax x transactionCheckInterval). Default 20 min.
   */
  discardHorizonMs?: number;
  /** How often the discard reconciliation runs. Default 10000 ms. */
  reconcileIntervalMs?: number;
  /** Run the discard reconciliation at all. Default true. */
  reconcileDiscarded?: boolean;
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
  requestTimeoutMs?: number;
  startTimeoutMs?: number;
  shutdownTimeoutMs?: number;
  logger?: Logger;
}

export interface ResolvedRelayOptions {
  endpoints: string;
  dataSource: DataSource;
  topics: readonly string[];
  transactionTopics: ReadonlySet<string>;
  fifoTopics: ReadonlySet<string>;
  relayId: string;
  batchSize: number;
  leaseMs: number;
  pollIntervalMs: number;
  maxAttempts: number;
  backoff: BackoffPolicy;
  discardHorizonMs: number;
  reconcileIntervalMs: number;
  reconcileDiscarded: boolean;
  namespace: string;
  credentials?: Credentials;
  sslEnabled: boolean;
  /** Custom CA (PEM) to trust instead of the system CAs. */
  tlsCa?: Buffer;
  requestTimeoutMs: number;
  startTimeoutMs: number;
  shutdownTimeoutMs: number;
  logger: Logger;
}

const KNOWN = [
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
] as const;
const HOUR = 3_600_000;

function topicList(option: string, value: unknown, required: boolean): string[] {
  if (value === undefined && !required) return [];
  if (!Array.isArray(value) || (required && value.length === 0)) {
    throw new InvalidOptionError(option, value, `${required ? 'a non-empty' : 'an'} array of topic names`);
  }
  return Array.from(value, (t: unknown, i: number) =>
    requireString(`${option}[${i}]`, t, {
      pattern: RESOURCE_NAME_RE,
      describe: 'a topic name of 1-127 letters, digits, "_", "-" or "%"',
    }),
  );
}

export function resolveRelayOptions(input: unknown): ResolvedRelayOptions {
  const o = requireObject('options', input);
  rejectUnknownKeys('options', o, KNOWN);
  const endpoints = requireEndpoints(o.endpoints);
  const dataSource = requireDataSource(o.dataSource);
  const topics = topicList('topics', o.topics, true);
  const transactionTopics = topicList('transactionTopics', o.transactionTopics, false);
  const fifoTopics = topicList('fifoTopics', o.fifoTopics, false);
  for (const [name, list] of [
    ['transactionTopics', transactionTopics],
    ['fifoTopics', fifoTopics],
  ] as const) {
    list.forEach((t, i) => {
      if (!topics.includes(t)) throw new InvalidOptionError(`${name}[${i}]`, t, 'one of options.topics');
    });
  }
  const both = transactionTopics.find((t) => fifoTopics.includes(t));
  if (both !== undefined) {
    throw new InvalidOptionError('fifoTopics', both, 'a topic not also listed in transactionTopics');
  }
  const b = optionalObject('backoff', o.backoff);
  rejectUnknownKeys('backoff', b, ['baseMs', 'maxDelayMs', 'jitterMs']);
  const baseMs = optionalInt('backoff.baseMs', b.baseMs, 1000, 1, HOUR);
  const maxDelayMs = optionalInt('backoff.maxDelayMs', b.maxDelayMs, 300_000, 1, 24 * HOUR);
  if (maxDelayMs < baseMs) {
    throw new InvalidOptionError('backoff.maxDelayMs', maxDelayMs, `at least backoff.baseMs (${baseMs})`);
  }
  const credentials = optionalCredentials(o.credentials);
  return {
    endpoints,
    dataSource,
    topics: [...new Set(topics)],
    transactionTopics: new Set(transactionTopics),
    fifoTopics: new Set(fifoTopics),
    relayId: optionalString(
      'relayId',
      o.relayId,
      `relay-${process.pid}-${Math.random().toString(36).slice(2, 10)}`,
      { maxLength: 64 },
    ),
    batchSize: optionalInt('batchSize', o.batchSize, 100, 1, 1000),
    leaseMs: optionalInt('leaseMs', o.leaseMs, 30_000, 1000, HOUR),
    pollIntervalMs: optionalInt('pollIntervalMs', o.pollIntervalMs, 500, 10, 60_000),
    maxAttempts: optionalInt('maxAttempts', o.maxAttempts, 10, 1, 1000),
    backoff: { baseMs, maxDelayMs, jitterMs: optionalInt('backoff.jitterMs', b.jitterMs, 1000, 0, HOUR) },
    discardHorizonMs: optionalInt('discardHorizonMs', o.discardHorizonMs, 20 * 60_000, 1000, 7 * 24 * HOUR),
    reconcileIntervalMs: optionalInt('reconcileIntervalMs', o.reconcileIntervalMs, 10_000, 100, HOUR),
    reconcileDiscarded: optionalBoolean('reconcileDiscarded', o.reconcileDiscarded, true),
    namespace: optionalString('namespace', o.namespace, '', { pattern: RESOURCE_NAME_RE }),
    ...(credentials ? { credentials } : {}),
    ...resolveTls(o.tls, o.sslEnabled),
    requestTimeoutMs: optionalInt('requestTimeoutMs', o.requestTimeoutMs, 3000, 100, 120_000),
    startTimeoutMs: optionalInt('startTimeoutMs', o.startTimeoutMs, 15_000, 100, 600_000),
    shutdownTimeoutMs: optionalInt('shutdownTimeoutMs', o.shutdownTimeoutMs, 10_000, 0, 600_000),
    logger: optionalFunctionsOf<Logger>('logger', o.logger, ['debug', 'info', 'warn', 'error']) ?? noopLogger,
  };
}
