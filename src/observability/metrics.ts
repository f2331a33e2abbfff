import type { DataSource } from 'typeorm';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { InvalidOptionError } from '../errors';
import { requireDataSource } from '../util/clientOptions';
import { errorFields, noopLogger, type Logger } from '../util/logger';
import { withTimeout } from '../util/time';
import { optionalFunctionsOf, optionalInt, rejectUnknownKeys, requireObject } from '../util/validate';
import { ATTACH_OBSERVER, isObservable, type ObservableComponent, type TxObserver } from './observer';
import { requirePromClient } from './optional';
import { collectStatus, nameList, type ResolvedStatusOptions, type StatusReport } from './status';

/** What RocketMqTxMetrics needs of a prom-client `Registry` (any prom-client 14/15 registry fits). */
export interface MetricsRegistry {
  registerMetric(metric: never): void;
  getSingleMetric(name: string): unknown;
  metrics(): Promise<string>;
}

/** Scrape-time gauges read from the database with {@link collectStatus}. */
export interface StatusMetricsOptions {
  /** An initialized DataSource on the SDK's tables. */
  dataSource: DataSource;
  /** Only these topics (outbox and tx_record gauges). */
  topics?: readonly string[];
  /** Only these consumer groups (consumed_event gauge). */
  consumerGroups?: readonly string[];
  /** Scrapes within this many ms reuse the last snapshot. Default 10 000; 0 queries on every scrape. */
  cacheMs?: number;
  /**
   * A scrape waits at most this long for the snapshot; past it the status gauges are left out
   * and `rocketmq_tx_status_up` is 0 (the query keeps running and is reused). Default 2000.
   */
  timeoutMs?: number;
}

export interface RocketMqTxMetricsOptions {
  /** The prom-client Registry to register on. Default: prom-client's global `register`. */
  register?: MetricsRegistry;
  /** Adds the database gauges (in-doubt, outbox states and ages, tx_record, consumed_event). */
  status?: StatusMetricsOptions;
  /** Buckets in seconds of the transact, check-back and consume duration histograms. */
  durationBuckets?: readonly number[];
  /** Buckets in seconds of rocketmq_tx_consumer_lag_seconds. */
  lagBuckets?: readonly number[];
  /** pino-shaped; warns when a status snapshot fails. */
  logger?: Logger;
}

const DEFAULT_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const DEFAULT_LAG_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
const KNOWN = ['register', 'status', 'durationBuckets', 'lagBuckets', 'logger'];
const STATUS_KNOWN = ['dataSource', 'topics', 'consumerGroups', 'discardHorizonMs', 'cacheMs', 'timeoutMs'];
const TX_STATUSES = ['COMMITTED', 'ROLLED_BACK'] as const;
const RESOLVERS = ['PRODUCER', 'CHECK_BACK'] as const;
const OUTBOX_STATUSES = ['NEW', 'IN_FLIGHT', 'SENT', 'DEAD', 'CDC'] as const;

/** The name every rocketmq-tx metric starts with. */
export const METRIC_PREFIX = 'rocketmq_tx_';

interface ResolvedStatusMetrics {
  dataSource: DataSource;
  filter: ResolvedStatusOptions;
  cacheMs: number;
  timeoutMs: number;
}

class StatusTimeoutError extends Error {}

/**
 * Prometheus metrics (prom-client) for the SDK's components: attach each producer, relay and
 * consumer, and (with `status`) read database gauges at scrape time. Every metric, its type,
 * labels and meaning are listed in docs/metrics.md. One instance per registry.
 *
 * @example
 * const metrics = new RocketMqTxMetrics({ register, status: { dataSource } });
 * metrics.attach(producer);
 * metrics.attach(consumer);
 * // GET /metrics -> await register.metrics()
 *
 * @throws MissingDependencyError when prom-client is not installed.
 * @throws InvalidOptionError for a bad option, or a registry that already has rocketmq_tx_ metrics.
 */
export class RocketMqTxMetrics {
  /** The registry the metrics are registered on. */
  readonly register: MetricsRegistry;
  private readonly logger: Logger;
  private readonly attached = new WeakMap<object, () => void>();
  private readonly observer: TxObserver;
  private readonly status: ResolvedStatusMetrics | undefined;
  private last: { report: StatusReport; at: number } | undefined;
  private query: Promise<StatusReport> | undefined;
  private round: Promise<StatusReport | undefined> | undefined;
  private countStatusError: (reason: 'timeout' | 'error') => void = () => undefined;

  constructor(options: RocketMqTxMetricsOptions = {}) {
    const raw = requireObject('options', options);
    rejectUnknownKeys('options', raw, KNOWN);
    this.logger =
      optionalFunctionsOf<Logger>('logger', raw.logger, ['debug', 'info', 'warn', 'error']) ?? noopLogger;
    const durationBuckets = buckets('durationBuckets', raw.durationBuckets, DEFAULT_DURATION_BUCKETS);
    const lagBuckets = buckets('lagBuckets', raw.lagBuckets, DEFAULT_LAG_BUCKETS);
    this.status = raw.status === undefined ? undefined : resolveStatusMetrics(raw.status);
    const prom = requirePromClient('RocketMqTxMetrics');
    const register: unknown = raw.register === undefined ? prom.register : raw.register;
    if (
      typeof register !== 'object' ||
      register === null ||
      !['registerMetric', 'getSingleMetric', 'metrics'].every(
        (m) => typeof (register as Record<string, unknown>)[m] === 'function',
      )
    ) {
      throw new InvalidOptionError('register', register, 'a prom-client Registry');
    }
    const registry = register as unknown as Registry;
    if (registry.getSingleMetric(`${METRIC_PREFIX}transactions_total`) !== undefined) {
      throw new InvalidOptionError(
        'register',
        register,
        'a registry without rocketmq_tx_ metrics (create one RocketMqTxMetrics per registry and attach every component to it)',
      );
    }
    this.register = register as MetricsRegistry;
    const registers = [registry];
    const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> =>
      new prom.Counter<L>({ name: METRIC_PREFIX + name, help, labelNames, registers });
    const histogram = <L extends string>(
      name: string,
      help: string,
      labelNames: readonly L[],
      b: number[],
    ): Histogram<L> =>
      new prom.Histogram<L>({ name: METRIC_PREFIX + name, help, labelNames, buckets: b, registers });

    const transactions = counter(
      'transactions_total',
      'transact() calls by outcome (committed, rolled_back, fenced, outcome_unknown, failed) and effective delivery',
      ['producer_group', 'outcome', 'delivery'],
    );
    const transactionDuration = histogram(
      'transaction_duration_seconds',
      'Duration of transact(): half messages, local transaction and broker commit',
      ['producer_group', 'outcome'],
      durationBuckets,
    );
    const checkBacks = counter(
      'check_backs_total',
      'Broker check-backs answered, by answer (commit, rollback, unknown) and how the answer was decided',
      ['producer_group', 'answer', 'decided_by'],
    );
    const checkBackDuration = histogram(
      'check_back_duration_seconds',
      'Time to answer a check-back (queueing, fence write or row read)',
      ['producer_group', 'decided_by'],
      durationBuckets,
    );
    const endFailures = counter(
      'end_transaction_failures_total',
      'EndTransaction calls the broker did not acknowledge (the check-back resolves them)',
      ['producer_group'],
    );
    const fallbacks = counter(
      'outbox_fallbacks_total',
      'Transactions whose half message failed and whose events went to the outbox relay instead',
      ['producer_group'],
    );
    const relayDeliveries = counter(
      'relay_deliveries_total',
      'Outbox relay send attempts by result: sent, retry (rescheduled with backoff), dead (gave up)',
      ['topic', 'result'],
    );
    const republished = counter(
      'relay_republished_total',
      'IN_FLIGHT events whose broker commit was never confirmed, queued by the relay for republishing',
      [],
    );
    const recovered = counter(
      'discard_recovery_total',
      "The producer's discard recovery: events republished (result republished) or rescheduled after a failed republish (retry)",
      ['producer_group', 'result'],
    );
    const consumed = counter(
      'consumer_messages_total',
      'Deliveries processed by IdempotentConsumer, by outcome (applied, duplicate, stale, ignored, gap_held, malformed, unhandled, handler_failed, store_failed)',
      ['consumer_group', 'topic', 'outcome'],
    );
    const deadLetters = counter(
      'consumer_dead_letters_total',
      'Messages moved to the dead-letter queue, by the outcome of their last delivery',
      ['consumer_group', 'topic', 'outcome'],
    );
    const consumeDuration = histogram(
      'consume_duration_seconds',
      'Processing time of one delivery: dedupe, cursor, handler, commit and settle',
      ['consumer_group', 'topic', 'outcome'],
      durationBuckets,
    );
    const lag = histogram(
      'consumer_lag_seconds',
      "Time from the event's occurredAt (producer clock) to the settling of its applied delivery (consumer clock)",
      ['consumer_group', 'topic'],
      lagBuckets,
    );

    this.observer = {
      transaction: (e) => {
        transactions.inc({ producer_group: e.producerGroup, outcome: e.outcome, delivery: e.delivery });
        transactionDuration.observe(
          { producer_group: e.producerGroup, outcome: e.outcome },
          e.durationMs / 1000,
        );
      },
      checkBack: ({ producerGroup, outcome }) => {
        const decided = { producer_group: producerGroup, decided_by: outcome.decidedBy };
        checkBacks.inc({ ...decided, answer: outcome.resolution.toLowerCase() });
        checkBackDuration.observe(decided, outcome.durationMs / 1000);
      },
      endTransactionFailed: (e) => endFailures.inc({ producer_group: e.producerGroup }),
      outboxFallback: (e) => fallbacks.inc({ producer_group: e.producerGroup }),
      relayDelivery: (e) => relayDeliveries.inc({ topic: e.topic, result: e.result }),
      relayRepublished: (e) => republished.inc(e.count),
      discardRecovery: (e) => recovered.inc({ producer_group: e.producerGroup, result: e.result }),
      consumed: ({ consumerGroup, outcome, durationMs, at }) => {
        const labels = {
          consumer_group: consumerGroup,
          topic: outcome.topic,
          outcome: outcome.kind.toLowerCase(),
        };
        consumed.inc(labels);
        consumeDuration.observe(labels, durationMs / 1000);
        if (outcome.deadLettered) deadLetters.inc(labels);
        if (outcome.kind === 'APPLIED') {
          const occurred = Date.parse(outcome.envelope.occurredAt);
          if (Number.isFinite(occurred)) {
            lag.observe(
              { consumer_group: consumerGroup, topic: outcome.topic },
              Math.max(0, at - occurred) / 1000,
            );
          }
        }
      },
    };

    if (this.status) this.registerStatusGauges(prom, registers);
  }

  /**
   * Observes a TransactionalProducer, OutboxRelay or IdempotentConsumer (before or after its
   * start). Attaching the same component again is a no-op. Returns the function that detaches it.
   */
  attach(component: ObservableComponent): () => void {
    if (!isObservable(component)) {
      throw new InvalidOptionError(
        'component',
        component,
        'a TransactionalProducer, OutboxRelay or IdempotentConsumer',
      );
    }
    const existing = this.attached.get(component);
    if (existing) return existing;
    const remove = component[ATTACH_OBSERVER](this.observer);
    const detach = () => {
      remove();
      this.attached.delete(component);
    };
    this.attached.set(component, detach);
    return detach;
  }

  private registerStatusGauges(prom: ReturnType<typeof requirePromClient>, registers: Registry[]): void {
    const status = this.status!;
    const snapshot = () => this.snapshot();
    const gauge = <L extends string>(
      name: string,
      help: string,
      labelNames: readonly L[],
      fill: (g: Gauge<L>, r: StatusReport) => void,
    ): Gauge<L> => {
      const g: Gauge<L> = new prom.Gauge<L>({
        name: METRIC_PREFIX + name,
        help,
        labelNames,
        registers,
        async collect() {
          const r = await snapshot();
          g.reset();
          if (r) fill(g, r);
          // No snapshot: labelled gauges have no series; a plain one reads NaN (unknown), never 0.
          else if (labelNames.length === 0) g.set(NaN);
        },
      });
      return g;
    };
    const topics = status.filter.topics;
    const groups = status.filter.consumerGroups;
    gauge(
      'in_doubt_transactions',
      'Committed transactions whose broker commit is not confirmed yet (IN_FLIGHT events)',
      [],
      (g, r) => g.set(r.inDoubt.transactions),
    );
    gauge('in_doubt_oldest_age_seconds', 'Age of the oldest in-doubt transaction (0 when none)', [], (g, r) =>
      g.set((r.inDoubt.oldestAgeMs ?? 0) / 1000),
    );
    gauge(
      'in_doubt_events',
      'Unconfirmed IN_FLIGHT events by state: awaiting_broker (within the discard horizon; the broker commits them or already did), overdue (past it, not taken for republishing), republishing (taken by a discard recovery)',
      ['state'],
      (g, r) => {
        g.set({ state: 'awaiting_broker' }, r.inDoubt.byState.awaitingBroker.events);
        g.set({ state: 'overdue' }, r.inDoubt.byState.overdue.events);
        g.set({ state: 'republishing' }, r.inDoubt.byState.republishing.events);
      },
    );
    gauge(
      'in_doubt_oldest_age_by_state_seconds',
      'Age of the oldest unconfirmed event in each state (0 when none)',
      ['state'],
      (g, r) => {
        const age = (ms: number | null) => (ms ?? 0) / 1000;
        g.set({ state: 'awaiting_broker' }, age(r.inDoubt.byState.awaitingBroker.oldestAgeMs));
        g.set({ state: 'overdue' }, age(r.inDoubt.byState.overdue.oldestAgeMs));
        g.set({ state: 'republishing' }, age(r.inDoubt.byState.republishing.oldestAgeMs));
      },
    );
    gauge(
      'outbox_events',
      'outbox_event rows by topic and status (NEW, IN_FLIGHT, SENT, DEAD)',
      ['topic', 'status'],
      (g, r) => {
        const byTopic = {
          ...Object.fromEntries((topics ?? []).map((t) => [t, undefined])),
          ...r.outbox.byTopic,
        };
        for (const [topic, counts] of Object.entries(byTopic)) {
          for (const s of OUTBOX_STATUSES) g.set({ topic, status: s }, counts?.byStatus[s] ?? 0);
        }
      },
    );
    gauge(
      'outbox_oldest_undelivered_age_seconds',
      'Age of the oldest NEW or IN_FLIGHT outbox event since its local commit (0 when none)',
      [],
      (g, r) => g.set((r.outbox.oldestUndeliveredAgeMs ?? 0) / 1000),
    );
    gauge(
      'tx_records',
      'tx_record rows by status and resolver (PRODUCER, CHECK_BACK)',
      ['status', 'resolved_by'],
      (g, r) => {
        for (const s of TX_STATUSES) {
          for (const by of RESOLVERS)
            g.set({ status: s, resolved_by: by }, r.txRecords.byStatusAndResolvedBy[s][by]);
        }
      },
    );
    gauge(
      'consumed_events',
      'consumed_event rows (the dedupe window) per consumer group',
      ['consumer_group'],
      (g, r) => {
        for (const group of groups ?? []) g.set({ consumer_group: group }, 0);
        for (const [group, c] of Object.entries(r.consumedEvents.byConsumerGroup))
          g.set({ consumer_group: group }, c.total);
      },
    );
    const up: Gauge = new prom.Gauge({
      name: `${METRIC_PREFIX}status_up`,
      help: '1 if the last status snapshot of the database succeeded within timeoutMs, else 0',
      registers,
      async collect() {
        up.set((await snapshot()) ? 1 : 0);
      },
    });
    const errors: Counter<'reason'> = new prom.Counter({
      name: `${METRIC_PREFIX}status_errors_total`,
      help: 'Status snapshots that failed (error) or did not finish within timeoutMs (timeout)',
      labelNames: ['reason'],
      registers,
      async collect() {
        await snapshot();
      },
    });
    this.countStatusError = (reason) => errors.inc({ reason });
  }

  /** One snapshot per cacheMs, shared by every gauge of a scrape; a slow query is never started twice. */
  private snapshot(): Promise<StatusReport | undefined> {
    const s = this.status!;
    if (this.last && Date.now() - this.last.at <= s.cacheMs) return Promise.resolve(this.last.report);
    if (this.round) return this.round;
    if (!this.query) {
      this.query = collectStatus(s.dataSource, {
        ...(s.filter.topics ? { topics: s.filter.topics } : {}),
        ...(s.filter.consumerGroups ? { consumerGroups: s.filter.consumerGroups } : {}),
      })
        .then((report) => {
          this.last = { report, at: Date.now() };
          return report;
        })
        .finally(() => {
          this.query = undefined;
        });
    }
    this.round = withTimeout(this.query, s.timeoutMs, () => new StatusTimeoutError())
      .catch((err: unknown) => {
        const timeout = err instanceof StatusTimeoutError;
        this.countStatusError(timeout ? 'timeout' : 'error');
        this.last = undefined;
        this.logger.warn(
          timeout ? { timeoutMs: s.timeoutMs } : errorFields(err),
          timeout
            ? 'status snapshot did not finish in time; status gauges left out'
            : 'status snapshot failed',
        );
        return undefined;
      })
      .finally(() => {
        this.round = undefined;
      });
    return this.round;
  }
}

function buckets(option: string, value: unknown, fallback: number[]): number[] {
  if (value === undefined) return [...fallback];
  if (
    !Array.isArray(value) ||
    value.length === 0 ||
    value.length > 50 ||
    !value.every(
      (v, i) => typeof v === 'number' && Number.isFinite(v) && v > 0 && (i === 0 || v > value[i - 1]),
    )
  ) {
    throw new InvalidOptionError(option, value, 'an increasing array of 1-50 positive numbers (seconds)');
  }
  return [...(value as number[])];
}

function resolveStatusMetrics(value: unknown): ResolvedStatusMetrics {
  const raw = requireObject('status', value);
  rejectUnknownKeys('status', raw, STATUS_KNOWN);
  let dataSource: DataSource;
  try {
    dataSource = requireDataSource(raw.dataSource);
  } catch {
    throw new InvalidOptionError('status.dataSource', raw.dataSource, 'a TypeORM DataSource');
  }
  const filter: ResolvedStatusOptions = {
    topics: nameList('status.topics', raw.topics),
    consumerGroups: nameList('status.consumerGroups', raw.consumerGroups),
    discardHorizonMs: optionalInt(
      'status.discardHorizonMs',
      raw.discardHorizonMs,
      20 * 60_000,
      1000,
      7 * 24 * 3_600_000,
    ),
  };
  return {
    dataSource,
    filter,
    cacheMs: optionalInt('status.cacheMs', raw.cacheMs, 10_000, 0, 3_600_000),
    timeoutMs: optionalInt('status.timeoutMs', raw.timeoutMs, 2000, 10, 60_000),
  };
}
