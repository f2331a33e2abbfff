import {
  CONNECTION_OPTION_KEYS,
  RESOURCE_NAME_RE,
  resolveConnection,
  resolveTransport,
  type ConnectionOptions,
  type ResolvedConnection,
} from '../util/clientOptions';
import { InvalidOptionError } from '../errors';
import { resolveRetryPolicy, type RetryOptions, type RetryPolicy } from '../util/retryPolicy';
import {
  optionalBoolean,
  optionalInt,
  optionalString,
  rejectUnknownKeys,
  requireObject,
  requireString,
} from '../util/validate';
import type { BrokerTransport } from '../broker/gateway';
import type { BackoffPolicy } from './backoff';
import type { RelayOutcome } from './outcome';

/** The connection options (ConnectionOptions: `dataSource` is the database the producers write outbox_event to) and: */
export interface OutboxRelayOptions extends ConnectionOptions {
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
  /**
   * Claimed batches being sent at once: after a full batch the relay claims the next one while
   * the earlier ones are still being sent and marked. 1 = claim, send, mark, one after another.
   * Default 2.
   */
  batchesInFlight?: number;
  /** How long a claimed row is ours; a relay that dies loses its rows after this. Default 30000 ms. */
  leaseMs?: number;
  /** Wait between polls when the last batch was not full. Default 500 ms. */
  pollIntervalMs?: number;
  /** Tries before a row becomes DEAD (with its last error; never SENT). Default 10. */
  maxAttempts?: number;
  /** Retry schedule of failed sends. Default { initialDelayMs: 1000, maxDelayMs: 300000, jitterMs: 1000 }. */
  retry?: RetryOptions;
  /**
   * Older name of `retry`, with `baseMs` for `initialDelayMs`; still accepted (not together with
   * `retry`).
   * @deprecated Use `retry`.
   */
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
  /**
   * How the relay's sends reach the proxy: `'lean'` (default: SendMessage and EndTransaction over
   * the SDK's own HTTP/2 channel; the official client keeps start-up, routes, heartbeats and
   * check-backs) or `'official'` (rocketmq-client-nodejs). As the producer's;
   * docs/lean-transport.md.
   */
  transport?: BrokerTransport;
  /** Called after each delivery attempt (sent, retry, dead). Must not throw; errors are logged. */
  onOutcome?: (outcome: RelayOutcome) => void;
}

export interface ResolvedRelayOptions extends ResolvedConnection {
  topics: readonly string[];
  transactionTopics: ReadonlySet<string>;
  fifoTopics: ReadonlySet<string>;
  relayId: string;
  batchSize: number;
  batchesInFlight: number;
  leaseMs: number;
  pollIntervalMs: number;
  maxAttempts: number;
  retry: RetryPolicy;
  discardHorizonMs: number;
  reconcileIntervalMs: number;
  reconcileDiscarded: boolean;
  transport: BrokerTransport;
  onOutcome?: (outcome: RelayOutcome) => void;
}

const KNOWN = [
  ...CONNECTION_OPTION_KEYS,
  'topics',
  'transactionTopics',
  'fifoTopics',
  'relayId',
  'batchSize',
  'batchesInFlight',
  'leaseMs',
  'pollIntervalMs',
  'maxAttempts',
  'retry',
  'backoff',
  'discardHorizonMs',
  'reconcileIntervalMs',
  'reconcileDiscarded',
  'transport',
  'onOutcome',
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
  const connection = resolveConnection(o, { shutdownTimeoutMs: 10_000 });
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
  const retry = resolveRetryPolicy(
    'retry',
    o.retry,
    { initialDelayMs: 1000, maxDelayMs: 300_000, jitterMs: 1000, maxAllowedDelayMs: 24 * HOUR },
    { option: 'backoff', value: o.backoff },
  );
  if (o.onOutcome !== undefined && typeof o.onOutcome !== 'function') {
    throw new InvalidOptionError('onOutcome', o.onOutcome, 'a function');
  }
  return {
    ...connection,
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
    batchesInFlight: optionalInt('batchesInFlight', o.batchesInFlight, 2, 1, 16),
    leaseMs: optionalInt('leaseMs', o.leaseMs, 30_000, 1000, HOUR),
    pollIntervalMs: optionalInt('pollIntervalMs', o.pollIntervalMs, 500, 10, 60_000),
    maxAttempts: optionalInt('maxAttempts', o.maxAttempts, 10, 1, 1000),
    retry,
    discardHorizonMs: optionalInt('discardHorizonMs', o.discardHorizonMs, 20 * 60_000, 1000, 7 * 24 * HOUR),
    reconcileIntervalMs: optionalInt('reconcileIntervalMs', o.reconcileIntervalMs, 10_000, 100, HOUR),
    reconcileDiscarded: optionalBoolean('reconcileDiscarded', o.reconcileDiscarded, true),
    transport: resolveTransport(o.transport),
    ...(o.onOutcome ? { onOutcome: o.onOutcome as (outcome: RelayOutcome) => void } : {}),
  };
}
