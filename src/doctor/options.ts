import type { DataSource } from 'typeorm';
import { InvalidOptionError } from '../errors';
import { GRANT_COMPONENTS, type GrantComponent } from '../store/typeorm/grants';
import {
  resolveDoctorConsumers,
  resolveTopicEvents,
  type DoctorConsumerOptions,
  type DoctorEventType,
  type ResolvedDoctorConsumer,
} from './codeOptions';
import {
  BROKER_CONNECTION_OPTION_KEYS,
  requireDataSource,
  requireResourceName,
  resolveBrokerConnection,
  type BrokerConnectionOptions,
  type ResolvedBrokerConnection,
} from '../util/clientOptions';
import { requireEndpoints } from '../util/validate';
import { noopLogger, type Logger } from '../util/logger';
import {
  optionalBoolean,
  optionalFunctionsOf,
  optionalInt,
  optionalObject,
  optionalOneOf,
  optionalString,
  rejectUnknownKeys,
} from '../util/validate';
import type { ConfirmBy } from '../producer/options';

export type { DoctorConsumerOptions, DoctorEventType, ResolvedDoctorConsumer } from './codeOptions';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * The broker to check: the broker half of the components' ConnectionOptions (endpoints,
 * namespace, credentials, tls, requestTimeoutMs), and the NameServer for the admin reads.
 */
export interface DoctorBrokerOptions extends BrokerConnectionOptions {
  /**
   * NameServer address(es) ("host:9876" or "h1:9876;h2:9876"): doctor then reads, over
   * RocketMQ's remoting protocol, each master broker's transactionTimeOut /
   * transactionCheckInterval / transactionCheckMax (used instead of the stated brokerTxTimeoutMs,
   * brokerCheckIntervalMs, brokerCheckMax), each consumer group's retryMaxTimes and DLQ depth,
   * and the producers online per transactional topic. Without it those checks are skipped.
   */
  nameServer?: string;
}

/** Limits of the database checks; each has a default (docs/doctor.md). */
export interface DoctorThresholds {
  /** NEW outbox rows (waiting for the relay) above which the backlog warns. Default 1000. */
  maxBacklog?: number;
  /** Age of the oldest undelivered (NEW or IN_FLIGHT) event above which it fails. Default discardHorizonMs + 10 min. */
  maxUndeliveredAgeMs?: number;
  /** DEAD outbox rows above which it fails. Default 0. */
  maxDead?: number;
  /** Messages in a consumer group's dead-letter queue (%DLQ%group) above which it warns (needs broker.nameServer). Default 0. */
  maxDlqDepth?: number;
  /** Your retention (what `rocketmq-tx archive --older-than` uses); without it the retention check is skipped. */
  retentionMs?: number;
  /** How far past `retentionMs` the oldest SENT row may be before it warns (archival runs periodically). Default 1 day. */
  retentionGraceMs?: number;
}

export interface DoctorOptions {
  /** Your initialized DataSource (mysql, mariadb or postgres), connected as the user to check. Without it the database checks are skipped. */
  dataSource?: DataSource;
  /** The components this database user runs (its grants are compared with theirs). Without it the grants checks are skipped. */
  components?: readonly GrantComponent[];
  /** true: outbox_event_archive must exist (you run Retention.archive). Default: checked only when it exists. */
  archive?: boolean;
  /** With the `migrations` component: TypeORM's migrationsTableName, whose grants are compared too. Default 'migrations'. */
  migrationsTableName?: string;
  /** Without it the broker checks are skipped. */
  broker?: DoctorBrokerOptions;
  /** Topics sent with delivery 'transactional': must be TRANSACTION topics. */
  transactionTopics?: readonly string[];
  /** Topics delivered only through the outbox and relay: NORMAL topics (FIFO ones in fifoTopics). */
  outboxTopics?: readonly string[];
  /** FIFO topics (outbox delivery; transactional messages cannot be FIFO). */
  fifoTopics?: readonly string[];
  /**
   * The producer's `topics` (declared at start; check-backs reach a producer per topic). Every
   * transactional topic must be among them. Without it that check is skipped.
   */
  producerTopics?: readonly string[];
  /** Consumer groups whose broker settings (retryMaxTimes, DLQ depth) are read (besides those of `consumers`). */
  consumerGroups?: readonly string[];
  /** Your consumers' options: their handlers and upcasters are checked against `topicEvents`. */
  consumers?: readonly DoctorConsumerOptions[];
  /** The event types and versions each topic carries, e.g. `{ orders_events: [OrderCreated, OrderPaidV2] }`. */
  topicEvents?: Readonly<Record<string, readonly DoctorEventType[]>>;
  /** The producer's `outboxFallback`. Default false. */
  outboxFallback?: boolean;
  /** The producer's `checkBack.lockWaitTimeoutMs`. Default 2000. */
  lockWaitTimeoutMs?: number;
  /** The producer's `confirmBy`. Default 'endTransaction' (the producer's default). */
  confirmBy?: ConfirmBy;
  /** The relay's / producer's discard horizon. Default 20 min. */
  discardHorizonMs?: number;
  /** The broker's transactionCheckInterval as you configured it. Default 30000 (RocketMQ's). */
  brokerCheckIntervalMs?: number;
  /** The broker's transactionCheckMax. Default 15. */
  brokerCheckMax?: number;
  /** The broker's transactionTimeOut. Default 6000. */
  brokerTxTimeoutMs?: number;
  thresholds?: DoctorThresholds;
  /** Called before each group of checks ("checking the schema"), e.g. to print progress. */
  onProgress?: (message: string) => void;
  logger?: Logger;
}

export interface ResolvedDoctorOptions {
  dataSource: DataSource | undefined;
  components: GrantComponent[];
  archive: boolean | undefined;
  migrationsTableName: string;
  broker: (ResolvedBrokerConnection & { nameServer?: string }) | undefined;
  producerTopics: string[] | undefined;
  consumerGroups: string[];
  consumers: ResolvedDoctorConsumer[];
  topicEvents: Map<string, DoctorEventType[]>;
  transactionTopics: string[];
  outboxTopics: string[];
  fifoTopics: string[];
  outboxFallback: boolean;
  lockWaitTimeoutMs: number;
  confirmBy: ConfirmBy;
  discardHorizonMs: number;
  brokerCheckIntervalMs: number;
  brokerCheckMax: number;
  brokerTxTimeoutMs: number;
  maxBacklog: number;
  maxUndeliveredAgeMs: number;
  maxDead: number;
  maxDlqDepth: number;
  retentionMs: number | undefined;
  retentionGraceMs: number;
  onProgress: (message: string) => void;
  logger: Logger;
}

const KEYS = [
  'dataSource',
  'components',
  'archive',
  'migrationsTableName',
  'broker',
  'transactionTopics',
  'outboxTopics',
  'fifoTopics',
  'outboxFallback',
  'producerTopics',
  'consumerGroups',
  'consumers',
  'topicEvents',
  'lockWaitTimeoutMs',
  'confirmBy',
  'discardHorizonMs',
  'brokerCheckIntervalMs',
  'brokerCheckMax',
  'brokerTxTimeoutMs',
  'thresholds',
  'onProgress',
  'logger',
];

function topicList(option: string, value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > 100) {
    throw new InvalidOptionError(option, value, 'an array of at most 100 topic names');
  }
  return [...new Set(value.map((v: unknown, i: number) => requireResourceName(`${option}[${i}]`, v)))];
}

function components(value: unknown): GrantComponent[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    throw new InvalidOptionError('components', value, `an array of ${GRANT_COMPONENTS.join(', ')}`);
  }
  return [
    ...new Set(
      value.map((v: unknown, i: number) => {
        if (typeof v !== 'string' || !(GRANT_COMPONENTS as readonly string[]).includes(v)) {
          throw new InvalidOptionError(`components[${i}]`, v, `one of ${GRANT_COMPONENTS.join(', ')}`);
        }
        return v as GrantComponent;
      }),
    ),
  ];
}

function broker(value: unknown): ResolvedDoctorOptions['broker'] {
  if (value === undefined) return undefined;
  const b = optionalObject('broker', value);
  rejectUnknownKeys('broker', b, [...BROKER_CONNECTION_OPTION_KEYS, 'nameServer']);
  const resolved = resolveBrokerConnection(b, 'broker.');
  if (resolved.namespace !== '') requireResourceName('broker.namespace', resolved.namespace);
  return {
    ...resolved,
    ...(b.nameServer !== undefined
      ? { nameServer: requireEndpoints(b.nameServer, 'broker.nameServer') }
      : {}),
  };
}

/** Validates every option; throws InvalidOptionError naming the first bad one. */
export function resolveDoctorOptions(options: unknown): ResolvedDoctorOptions {
  const o = optionalObject('options', options);
  rejectUnknownKeys('options', o, KEYS);
  const t = optionalObject('thresholds', o.thresholds);
  rejectUnknownKeys('thresholds', t, [
    'maxBacklog',
    'maxUndeliveredAgeMs',
    'maxDead',
    'maxDlqDepth',
    'retentionMs',
    'retentionGraceMs',
  ]);
  const discardHorizonMs = optionalInt('discardHorizonMs', o.discardHorizonMs, 20 * MINUTE, 1000, 7 * DAY);
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function') {
    throw new InvalidOptionError('onProgress', o.onProgress, 'a function');
  }
  return {
    dataSource: o.dataSource === undefined ? undefined : requireDataSource(o.dataSource),
    components: components(o.components),
    archive: o.archive === undefined ? undefined : optionalBoolean('archive', o.archive, false),
    migrationsTableName: optionalString('migrationsTableName', o.migrationsTableName, 'migrations', {
      pattern: /^[A-Za-z0-9_$]{1,64}$/,
      describe: 'a table name of 1-64 letters, digits, "_" or "$"',
    }),
    broker: broker(o.broker),
    transactionTopics: topicList('transactionTopics', o.transactionTopics),
    outboxTopics: topicList('outboxTopics', o.outboxTopics),
    fifoTopics: topicList('fifoTopics', o.fifoTopics),
    outboxFallback: optionalBoolean('outboxFallback', o.outboxFallback, false),
    producerTopics:
      o.producerTopics === undefined ? undefined : topicList('producerTopics', o.producerTopics),
    consumerGroups: topicList('consumerGroups', o.consumerGroups),
    consumers: resolveDoctorConsumers(o.consumers),
    topicEvents: resolveTopicEvents(o.topicEvents),
    lockWaitTimeoutMs: optionalInt('lockWaitTimeoutMs', o.lockWaitTimeoutMs, 2000, 1, 60_000),
    confirmBy: optionalOneOf<ConfirmBy>(
      'confirmBy',
      o.confirmBy,
      ['endTransaction', 'delivery'],
      'endTransaction',
    ),
    discardHorizonMs,
    brokerCheckIntervalMs: optionalInt('brokerCheckIntervalMs', o.brokerCheckIntervalMs, 30_000, 100, DAY),
    brokerCheckMax: optionalInt('brokerCheckMax', o.brokerCheckMax, 15, 1, 1000),
    brokerTxTimeoutMs: optionalInt('brokerTxTimeoutMs', o.brokerTxTimeoutMs, 6000, 100, DAY),
    maxBacklog: optionalInt('thresholds.maxBacklog', t.maxBacklog, 1000, 0, 1_000_000_000),
    maxUndeliveredAgeMs: optionalInt(
      'thresholds.maxUndeliveredAgeMs',
      t.maxUndeliveredAgeMs,
      discardHorizonMs + 10 * MINUTE,
      1000,
      30 * DAY,
    ),
    maxDead: optionalInt('thresholds.maxDead', t.maxDead, 0, 0, 1_000_000_000),
    maxDlqDepth: optionalInt('thresholds.maxDlqDepth', t.maxDlqDepth, 0, 0, 1_000_000_000),
    retentionMs:
      t.retentionMs === undefined
        ? undefined
        : optionalInt('thresholds.retentionMs', t.retentionMs, 0, MINUTE, 3650 * DAY),
    retentionGraceMs: optionalInt('thresholds.retentionGraceMs', t.retentionGraceMs, DAY, 0, 365 * DAY),
    onProgress: (o.onProgress as ((message: string) => void) | undefined) ?? (() => undefined),
    logger: optionalFunctionsOf<Logger>('logger', o.logger, ['debug', 'info', 'warn', 'error']) ?? noopLogger,
  };
}
