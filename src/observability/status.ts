import type { DataSource } from 'typeorm';
import { InvalidOptionError } from '../errors';
import { dialectFor } from '../store/typeorm/dialect';
import { readStatusRows, type StatusRows } from '../store/typeorm/statusQueries';
import { notInitialized, requireDataSource, requireResourceName } from '../util/clientOptions';
import { optionalInt, optionalObject, rejectUnknownKeys } from '../util/validate';

/** Filters of {@link collectStatus}. Without a filter every row of the SDK's tables is counted. */
export interface StatusOptions {
  /**
   * Only these topics (1-100 names): outbox_event by `topic`, tx_record by `topic` (the first
   * event's topic of the transaction, or the topic a check-back asked about).
   */
  topics?: readonly string[];
  /** Only these consumer groups in `consumedEvents` (1-100 names). */
  consumerGroups?: readonly string[];
  /**
   * The producers' (or relay's) discard horizon: unconfirmed events older than this and not yet
   * taken for republishing count as `inDoubt.byState.overdue`. Default 20 min (the default of
   * `discardRecovery.horizonMs` and of the relay's `discardHorizonMs`).
   */
  discardHorizonMs?: number;
}

/**
 * Unconfirmed (IN_FLIGHT) events by what happens to them next:
 * - `awaitingBroker`: younger than the discard horizon, never republished. The broker commits
 *   them itself (EndTransaction, or a check-back the fence answers COMMIT), or already did and
 *   the confirmation died with a killed process. No action needed: after a crash these are
 *   expected, and most were delivered.
 * - `overdue`: older than the horizon and not taken by a discard recovery: no producer of their
 *   group runs one (turned off, or not running) and no relay promotes them. Act on these.
 * - `republishing`: taken by a producer's discard recovery (leased now, or rescheduled after a
 *   failed republish; see outbox_event.attempts and last_error).
 */
export type InDoubtState = 'awaitingBroker' | 'overdue' | 'republishing';

export interface InDoubtCounts {
  events: number;
  transactions: number;
  /** Age in ms (database clock) since the oldest one's local commit; null if none. */
  oldestAgeMs: number | null;
}

export type StatusTxStatus = 'COMMITTED' | 'ROLLED_BACK';
export type StatusResolvedBy = 'PRODUCER' | 'CHECK_BACK';
export type StatusOutboxStatus = 'NEW' | 'IN_FLIGHT' | 'SENT' | 'DEAD' | 'CDC';
export type StatusConsumedOutcome = 'APPLIED' | 'STALE' | 'IGNORED';

/** Outbox counts of one topic (or of all topics). */
export interface OutboxStatusCounts {
  /** Every row, whatever its status (also a status this version does not know). */
  total: number;
  byStatus: Record<StatusOutboxStatus, number>;
  /** NEW + IN_FLIGHT: committed events not yet known to be on the broker. */
  undelivered: number;
  /**
   * Age in ms of the oldest NEW or IN_FLIGHT row, measured on the database clock from its
   * transaction's tx_record.created_at (the local commit), or from occurred_at for a row without
   * a tx_record; null when nothing is undelivered.
   */
  oldestUndeliveredAgeMs: number | null;
}

/**
 * What {@link collectStatus} returns: a plain, JSON-serializable object. The shape is stable
 * (the CLI `status` command and the demo print it); fields are only ever added.
 */
export interface StatusReport {
  /** ISO-8601 UTC time (process clock) at which the queries completed. */
  generatedAt: string;
  /** The filter applied; null where none was given. */
  filter: { topics: string[] | null; consumerGroups: string[] | null };
  /** tx_record, the check-back fence. */
  txRecords: {
    total: number;
    byStatus: Record<StatusTxStatus, number>;
    byResolvedBy: Record<StatusResolvedBy, number>;
    /**
     * Counts per status and resolver, e.g. `ROLLED_BACK.CHECK_BACK` = transactions fenced by a
     * check-back (the producer never inserted its row in time).
     */
    byStatusAndResolvedBy: Record<StatusTxStatus, Record<StatusResolvedBy, number>>;
  };
  /**
   * Transactions the database committed whose broker commit is not confirmed yet: their events
   * are IN_FLIGHT outbox rows (a half message carries them and neither EndTransaction nor a
   * check-back COMMIT has been acknowledged). Outbox-delivery transactions are never in doubt
   * (their rows start NEW). After the check-back horizon the relay republishes them.
   */
  inDoubt: {
    /** Distinct transactions. */
    transactions: number;
    /** IN_FLIGHT events (one half message each). */
    events: number;
    /** Age in ms (database clock) of the oldest in-doubt transaction's tx_record.created_at; null if none. */
    oldestAgeMs: number | null;
    /** The same events split by what happens to them next (see {@link InDoubtState}). */
    byState: Record<InDoubtState, InDoubtCounts>;
  };
  /** outbox_event, over all topics (or the filtered ones), and per topic. */
  outbox: OutboxStatusCounts & {
    /** DEAD rows: gave up after maxAttempts; replay them (`relay.replayDead`). Same as byStatus.DEAD. */
    dead: number;
    /** Per topic, only topics that have rows. */
    byTopic: Record<string, OutboxStatusCounts>;
  };
  /** consumed_event, the consumers' dedupe table. */
  consumedEvents: {
    total: number;
    /** Per consumer group, only groups that have rows: total and per outcome. */
    byConsumerGroup: Record<string, { total: number } & Record<StatusConsumedOutcome, number>>;
  };
}

/** @internal One row of each query, as the driver returns it. */
export type { StatusRows };

const MAX_FILTER = 100;
const DEFAULT_DISCARD_HORIZON_MS = 20 * 60_000;
const IN_DOUBT_STATES: Readonly<Record<string, InDoubtState>> = {
  awaiting_broker: 'awaitingBroker',
  overdue: 'overdue',
  republishing: 'republishing',
};
const TX_STATUSES: readonly StatusTxStatus[] = ['COMMITTED', 'ROLLED_BACK'];
const RESOLVERS: readonly StatusResolvedBy[] = ['PRODUCER', 'CHECK_BACK'];
const OUTBOX_STATUSES: readonly StatusOutboxStatus[] = ['NEW', 'IN_FLIGHT', 'SENT', 'DEAD', 'CDC'];
const OUTCOMES: readonly StatusConsumedOutcome[] = ['APPLIED', 'STALE', 'IGNORED'];

/** @internal Validated filter. */
export interface ResolvedStatusOptions {
  topics: string[] | null;
  consumerGroups: string[] | null;
  discardHorizonMs: number;
}

/** @internal */
export function resolveStatusOptions(options: unknown): ResolvedStatusOptions {
  const raw = optionalObject('options', options);
  rejectUnknownKeys('options', raw, ['topics', 'consumerGroups', 'discardHorizonMs']);
  return {
    topics: nameList('options.topics', raw.topics),
    consumerGroups: nameList('options.consumerGroups', raw.consumerGroups),
    discardHorizonMs: optionalInt(
      'options.discardHorizonMs',
      raw.discardHorizonMs,
      DEFAULT_DISCARD_HORIZON_MS,
      1000,
      7 * 24 * 3_600_000,
    ),
  };
}

/** @internal A deduplicated list of 1-100 topic or group names, or null when absent. */
export function nameList(option: string, value: unknown): string[] | null {
  if (value === undefined) return null;
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_FILTER) {
    throw new InvalidOptionError(option, value, `an array of 1-${MAX_FILTER} names`);
  }
  return [...new Set(value.map((v: unknown, i: number) => requireResourceName(`${option}[${i}]`, v)))];
}

/**
 * A read-only snapshot of the SDK's tables: tx_record counts, in-doubt transactions, outbox
 * states and the oldest undelivered event, and consumed_event per consumer group.
 *
 * Three statements, run in parallel, one per table (outbox_event's is a UNION ALL of counts,
 * undelivered ages and in-doubt transactions); ages come from the database clock, so a skewed
 * application clock does not distort them. The undelivered and in-doubt parts are range reads
 * of the status index; the per-status counts scan an index of each table, whose size retention
 * bounds (see `Retention`). Nothing is written and no lock is taken.
 *
 * @example
 * const s = await collectStatus(dataSource, { topics: ['orders'] });
 * s.outbox.oldestUndeliveredAgeMs; // e.g. 1250, or null when everything is delivered
 * s.inDoubt.transactions;          // committed, broker commit not yet confirmed
 * s.outbox.dead;                   // events the relay gave up on
 *
 * @throws InvalidOptionError for a bad dataSource or filter (before any query).
 * @throws StoreError when a query fails (retriable unless a table or column is missing), or (not
 *   retriable) when the DataSource is not initialized; StoreAccessDeniedError (not retriable) when
 *   the user lacks SELECT on one of the tables.
 */
export async function collectStatus(dataSource: DataSource, options?: StatusOptions): Promise<StatusReport> {
  const ds = requireDataSource(dataSource);
  dialectFor(ds);
  const filter = resolveStatusOptions(options);
  if (!ds.isInitialized) {
    throw notInitialized('dataSource');
  }
  return shapeStatus(await readStatusRows(ds, filter), filter, new Date());
}

function count(value: unknown): number {
  const n = Number(value ?? 0);
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/** Microseconds (possibly a string or null) to whole ms, never negative; null stays null. */
function ageMs(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  const us = Number(value);
  if (!Number.isFinite(us)) return null;
  return Math.max(0, Math.floor(us / 1000));
}

function zeros<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

function emptyOutbox(): OutboxStatusCounts {
  return { total: 0, byStatus: zeros(OUTBOX_STATUSES), undelivered: 0, oldestUndeliveredAgeMs: null };
}

function older(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.max(a, b);
}

function isOneOf<K extends string>(keys: readonly K[], value: unknown): value is K {
  return typeof value === 'string' && (keys as readonly string[]).includes(value);
}

/** @internal Turns the raw rows into the report (pure; unit-tested). */
export function shapeStatus(rows: StatusRows, filter: ResolvedStatusOptions, now: Date): StatusReport {
  const tx: StatusReport['txRecords'] = {
    total: 0,
    byStatus: zeros(TX_STATUSES),
    byResolvedBy: zeros(RESOLVERS),
    byStatusAndResolvedBy: { COMMITTED: zeros(RESOLVERS), ROLLED_BACK: zeros(RESOLVERS) },
  };
  for (const r of rows.txRecords) {
    const n = count(r.n);
    tx.total += n;
    if (isOneOf(TX_STATUSES, r.status)) tx.byStatus[r.status] += n;
    if (isOneOf(RESOLVERS, r.resolved_by)) tx.byResolvedBy[r.resolved_by] += n;
    if (isOneOf(TX_STATUSES, r.status) && isOneOf(RESOLVERS, r.resolved_by)) {
      tx.byStatusAndResolvedBy[r.status][r.resolved_by] += n;
    }
  }

  const all = emptyOutbox();
  const byTopic: Record<string, OutboxStatusCounts> = {};
  const topicOf = (topic: string) => (byTopic[topic] ??= emptyOutbox());
  const none = (): InDoubtCounts => ({ events: 0, transactions: 0, oldestAgeMs: null });
  const inDoubt: StatusReport['inDoubt'] = {
    transactions: 0,
    events: 0,
    oldestAgeMs: null,
    byState: { awaitingBroker: none(), overdue: none(), republishing: none() },
  };
  for (const r of rows.outbox) {
    const n = count(r.n);
    if (r.k === 'in_doubt') {
      inDoubt.events = n;
      inDoubt.transactions = count(r.txs);
      inDoubt.oldestAgeMs = n > 0 ? ageMs(r.age_us) : null;
      continue;
    }
    if (r.k === 'in_doubt_state') {
      const state = typeof r.status === 'string' ? IN_DOUBT_STATES[r.status] : undefined;
      if (state && n > 0) {
        inDoubt.byState[state] = { events: n, transactions: count(r.txs), oldestAgeMs: ageMs(r.age_us) };
      }
      continue;
    }
    if (typeof r.topic !== 'string') continue;
    const t = topicOf(r.topic);
    if (r.k === 'count') {
      all.total += n;
      t.total += n;
      if (isOneOf(OUTBOX_STATUSES, r.status)) {
        all.byStatus[r.status] += n;
        t.byStatus[r.status] += n;
      }
    } else if (r.k === 'pending' && n > 0) {
      const age = ageMs(r.age_us);
      t.oldestUndeliveredAgeMs = older(t.oldestUndeliveredAgeMs, age);
      all.oldestUndeliveredAgeMs = older(all.oldestUndeliveredAgeMs, age);
    }
  }
  for (const c of [all, ...Object.values(byTopic)]) c.undelivered = c.byStatus.NEW + c.byStatus.IN_FLIGHT;

  const consumed: StatusReport['consumedEvents'] = { total: 0, byConsumerGroup: {} };
  for (const r of rows.consumed) {
    if (typeof r.consumer_group !== 'string') continue;
    const n = count(r.n);
    const g = (consumed.byConsumerGroup[r.consumer_group] ??= { total: 0, ...zeros(OUTCOMES) });
    g.total += n;
    consumed.total += n;
    if (isOneOf(OUTCOMES, r.outcome)) g[r.outcome] += n;
  }

  return {
    generatedAt: now.toISOString(),
    filter: {
      topics: filter.topics ? [...filter.topics] : null,
      consumerGroups: filter.consumerGroups ? [...filter.consumerGroups] : null,
    },
    txRecords: tx,
    inDoubt,
    outbox: { ...all, dead: all.byStatus.DEAD, byTopic },
    consumedEvents: consumed,
  };
}
