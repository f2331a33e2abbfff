import {
  CONNECTION_OPTION_KEYS,
  RESOURCE_NAME_RE,
  requireResourceName,
  resolveConnection,
  resolveTransport,
  type ConnectionOptions,
  type ResolvedConnection,
} from '../util/clientOptions';
import { InvalidOptionError } from '../errors';
import { MAX_MESSAGE_BYTES } from '../outbox/events';
import type { CheckBackResolver } from '../checkback/resolution';
import type { CheckBackOutcome, ResolverScope } from '../checkback/CheckBackDispatcher';
import type { DiscardRecoverySettings } from '../relay/DiscardRecovery';
import type { BrokerTransport } from '../broker/gateway';
import {
  optionalBoolean,
  optionalFunctionsOf,
  optionalInt,
  optionalObject,
  optionalOneOf,
  rejectUnknownKeys,
  requireObject,
  requireString,
} from '../util/validate';
import type { TransactionOutcome } from './outcome';

export interface CheckBackOptions {
  /** Resolves half messages without our TX_ID property, or all of them with `resolverScope: 'all'`. */
  resolver?: CheckBackResolver;
  /** Which check-backs go to `resolver`: only those without TX_ID (default) or all. */
  resolverScope?: ResolverScope;
  /**
   * Check-back decisions running at once on this instance, each holding one DB connection; the
   * fence decides the check-backs that wait meanwhile together, in batches. Default 4.
   */
  concurrency?: number;
  /** Check-backs waiting for a slot before new ones are answered UNKNOWN at once. Default 256. */
  maxQueued?: number;
  /** How long the fence INSERT waits on an open producer transaction. Default 2000 ms. */
  lockWaitTimeoutMs?: number;
  /** Called after each answered check-back (metrics, audit). Must not throw; errors are logged. */
  onResolved?: (outcome: CheckBackOutcome) => void;
}

/**
 * The producer's built-in discard recovery (on by default). RocketMQ discards a half message
 * after its check maximum with only a log line; every instance then republishes, from
 * outbox_event, its group's committed events whose broker commit was never confirmed.
 */
export interface DiscardRecoveryOptions {
  /**
   * Age of an unconfirmed committed event (from its local commit) after which it is
   * republished. Must exceed the broker's check-back horizon, transactionTimeOut +
   * transactionCheckMax x transactionCheckInterval (RocketMQ defaults: 6 s + 15 x 30 s); an
   * event republished while the broker still checks it is delivered twice (same eventId).
   * Default 20 min.
   */
  horizonMs?: number;
  /** Pause between rounds, jittered ±50 %. Default 10000 ms. */
  intervalMs?: number;
  /** Events leased per round. Default 100. */
  batchSize?: number;
  /** How long a leased event is this instance's (a killed instance's events are retaken after it). Default 30000 ms. */
  leaseMs?: number;
}

/**
 * How a transaction's events reach the broker.
 * - `transactional`: a half message per event, committed after the local COMMIT (row IN_FLIGHT).
 * - `outbox`: no half message; the row is NEW and the OutboxRelay delivers it.
 * - `cdc`: no half message; the row is CDC and `rocketmq-tx cdc` (Debezium reading the binlog)
 *   publishes it when the transaction commits. The relay never takes CDC rows.
 */
export type DeliveryMode = 'transactional' | 'outbox' | 'cdc';

/** The connection options (ConnectionOptions) and: */
export interface TransactionalProducerOptions extends ConnectionOptions {
  /** Identifies this service's transactions (TX_ORIGIN). One per database; same on every instance. */
  producerGroup: string;
  /** Every topic this producer sends to. Declared at start so check-backs reach this instance. */
  topics: readonly string[];
  checkBack?: CheckBackOptions;
  /** Largest message body accepted. Default and maximum 4 MiB (the proxy's maxMessageSize). */
  maxMessageBytes?: number;
  /** Default delivery mode of transact(); each call may override it. Default 'transactional'. */
  delivery?: DeliveryMode;
  /**
   * When a half message cannot be sent (broker down), commit anyway with the events as NEW rows
   * for the OutboxRelay. Default false: the caller gets BrokerUnavailableError and nothing commits.
   */
  outboxFallback?: boolean;
  /**
   * Built-in discard recovery: `false` turns it off (then run an OutboxRelay with
   * `reconcileDiscarded`, or committed events whose half message the broker discards are never
   * delivered). Default on, with the defaults of {@link DiscardRecoveryOptions}.
   */
  discardRecovery?: false | DiscardRecoveryOptions;
  /**
   * How half messages, their commit/rollback and normal sends reach the proxy. `'lean'`
   * (default): messages generated from the RocketMQ v2 protocol over one HTTP/2 connection per
   * proxy (node:http2): same headers, signatures, TLS, deadlines and typed errors, sends spread
   * over every writable queue; the official client still does start-up, routes, heartbeats and
   * check-backs. `'official'`: everything through rocketmq-client-nodejs. See
   * docs/lean-transport.md.
   */
  transport?: BrokerTransport;
  /**
   * When a transactional event counts as delivered, so that the discard recovery leaves it alone.
   * - `'endTransaction'` (default): when the proxy acknowledges its commit. Right for a proxy in
   *   Local mode (it embeds the broker and commits before it answers).
   * - `'delivery'`: when the broker delivers it to this producer group's own confirmation
   *   consumer, group `<producerGroup>_confirm` (started with the producer; it reads the
   *   producer's topics). Use it with a proxy in Cluster mode: that proxy forwards EndTransaction
   *   to the broker one way and answers OK before the broker applied it, so a broker that dies
   *   at that moment keeps only the half message, and if its checks of that half all go to
   *   killed instances (or to nobody, right after its restart) it discards it. An event confirmed
   *   on the proxy's OK is then lost; confirmed on delivery, it is republished at the discard
   *   horizon. Costs one more read of every message of the topics. See docs/cluster.md.
   */
  confirmBy?: ConfirmBy;
  /** Called after each transact() (committed, rolled back, fenced, ...). Must not throw; errors are logged. */
  onOutcome?: (outcome: TransactionOutcome) => void;
}

/** See {@link TransactionalProducerOptions.confirmBy}. */
export type ConfirmBy = 'endTransaction' | 'delivery';

export interface ResolvedProducerOptions extends ResolvedConnection {
  producerGroup: string;
  topics: readonly string[];
  checkBack: Required<Omit<CheckBackOptions, 'resolver' | 'onResolved'>> & {
    resolver?: CheckBackResolver;
    onResolved?: (outcome: CheckBackOutcome) => void;
  };
  maxMessageBytes: number;
  delivery: DeliveryMode;
  outboxFallback: boolean;
  /** null: off. */
  discardRecovery: DiscardRecoverySettings | null;
  transport: BrokerTransport;
  confirmBy: ConfirmBy;
  onOutcome?: (outcome: TransactionOutcome) => void;
}

const KNOWN = [
  ...CONNECTION_OPTION_KEYS,
  'producerGroup',
  'topics',
  'checkBack',
  'maxMessageBytes',
  'delivery',
  'outboxFallback',
  'discardRecovery',
  'transport',
  'confirmBy',
  'onOutcome',
] as const;
const DISCARD_RECOVERY_KNOWN = ['horizonMs', 'intervalMs', 'batchSize', 'leaseMs'] as const;
const HOUR = 3_600_000;
const CHECK_BACK_KNOWN = [
  'resolver',
  'resolverScope',
  'concurrency',
  'maxQueued',
  'lockWaitTimeoutMs',
  'onResolved',
] as const;

export function resolveProducerOptions(input: unknown): ResolvedProducerOptions {
  const o = requireObject('options', input);
  rejectUnknownKeys('options', o, KNOWN);
  const connection = resolveConnection(o, { shutdownTimeoutMs: 10_000 });
  const producerGroup = requireResourceName('producerGroup', o.producerGroup);
  if (!Array.isArray(o.topics) || o.topics.length === 0) {
    throw new InvalidOptionError('topics', o.topics, 'a non-empty array of topic names');
  }
  const topics = Array.from(o.topics, (t: unknown, i: number) =>
    requireString(`topics[${i}]`, t, {
      pattern: RESOURCE_NAME_RE,
      describe: 'a topic name of 1-127 letters, digits, "_", "-" or "%"',
    }),
  );
  const cb = optionalObject('checkBack', o.checkBack);
  rejectUnknownKeys('checkBack', cb, CHECK_BACK_KNOWN);
  const resolver = optionalFunctionsOf<CheckBackResolver>('checkBack.resolver', cb.resolver, ['resolve']);
  const resolverScope = cb.resolverScope ?? 'without-tx-id';
  if (resolverScope !== 'without-tx-id' && resolverScope !== 'all') {
    throw new InvalidOptionError('checkBack.resolverScope', resolverScope, '"without-tx-id" or "all"');
  }
  if (resolverScope === 'all' && !resolver) {
    throw new InvalidOptionError(
      'checkBack.resolver',
      resolver,
      'a CheckBackResolver when resolverScope is "all"',
    );
  }
  if (cb.onResolved !== undefined && typeof cb.onResolved !== 'function') {
    throw new InvalidOptionError('checkBack.onResolved', cb.onResolved, 'a function');
  }
  const onResolved = cb.onResolved as ((outcome: CheckBackOutcome) => void) | undefined;
  if (o.onOutcome !== undefined && typeof o.onOutcome !== 'function') {
    throw new InvalidOptionError('onOutcome', o.onOutcome, 'a function');
  }
  return {
    ...connection,
    producerGroup,
    topics: [...new Set(topics)],
    checkBack: {
      ...(resolver ? { resolver } : {}),
      ...(onResolved ? { onResolved } : {}),
      resolverScope,
      concurrency: optionalInt('checkBack.concurrency', cb.concurrency, 4, 1, 256),
      maxQueued: optionalInt('checkBack.maxQueued', cb.maxQueued, 256, 0, 100_000),
      lockWaitTimeoutMs: optionalInt('checkBack.lockWaitTimeoutMs', cb.lockWaitTimeoutMs, 2000, 1000, 60_000),
    },
    maxMessageBytes: optionalInt(
      'maxMessageBytes',
      o.maxMessageBytes,
      MAX_MESSAGE_BYTES,
      1,
      MAX_MESSAGE_BYTES,
    ),
    delivery: resolveDeliveryMode('delivery', o.delivery, 'transactional'),
    outboxFallback: optionalBoolean('outboxFallback', o.outboxFallback, false),
    discardRecovery: resolveDiscardRecovery(o.discardRecovery),
    transport: resolveTransport(o.transport),
    confirmBy: optionalOneOf<ConfirmBy>(
      'confirmBy',
      o.confirmBy,
      ['endTransaction', 'delivery'],
      'endTransaction',
    ),
    ...(o.onOutcome ? { onOutcome: o.onOutcome as (outcome: TransactionOutcome) => void } : {}),
  };
}

function resolveDiscardRecovery(value: unknown): DiscardRecoverySettings | null {
  if (value === false) return null;
  const d = optionalObject('discardRecovery', value === true ? undefined : value);
  rejectUnknownKeys('discardRecovery', d, DISCARD_RECOVERY_KNOWN);
  return {
    horizonMs: optionalInt('discardRecovery.horizonMs', d.horizonMs, 20 * 60_000, 1000, 7 * 24 * HOUR),
    intervalMs: optionalInt('discardRecovery.intervalMs', d.intervalMs, 10_000, 100, HOUR),
    batchSize: optionalInt('discardRecovery.batchSize', d.batchSize, 100, 1, 1000),
    leaseMs: optionalInt('discardRecovery.leaseMs', d.leaseMs, 30_000, 1000, HOUR),
    backoff: { baseMs: 1000, maxDelayMs: 300_000, jitterMs: 1000 },
  };
}

export function resolveDeliveryMode(option: string, value: unknown, fallback: DeliveryMode): DeliveryMode {
  return optionalOneOf<DeliveryMode>(option, value, ['transactional', 'outbox', 'cdc'], fallback);
}
