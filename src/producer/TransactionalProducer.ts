import type { EntityManager, QueryRunner } from 'typeorm';
import {
  BrokerUnavailableError,
  InvalidOptionError,
  NoActiveTransactionError,
  RocketMqTxError,
  TransactionFencedError,
  TransactionOutcomeUnknownError,
} from '../errors';
import { notInitialized } from '../util/clientOptions';
import { InFlight, Lifecycle, callHook } from '../lifecycle/Lifecycle';
import {
  connectionFields,
  gatewayConfig,
  type BrokerGateway,
  type GatewayConfig,
  type HalfMessage,
} from '../broker/gateway';
import { createGateway } from '../broker/createGateway';
import { CheckBackDispatcher, type CheckBackStats } from '../checkback/CheckBackDispatcher';
import { TxRecordResolver } from '../checkback/fence';
import type { OutboxInitialStatus, OutboxStore, TxRecordStore } from '../store/ports';
import { storesFor } from '../store';
import { abandonTransaction } from '../store/typeorm/statements';
import { toStoreError } from '../store/typeorm/storeError';
import { errorFields, type Logger } from '../util/logger';
import { uuidv7 } from '../util/uuidv7';
import {
  ATTACH_OBSERVER,
  Observers,
  elapsedMs,
  type TransactionOutcomeLabel,
  type TxObserver,
} from '../observability/observer';
import { DiscardRecovery, type DiscardRecoveryStats } from '../relay/DiscardRecovery';
import { ConfirmationBatcher } from '../util/ConfirmationBatcher';
import { RocketMqConsumerGateway } from '../broker/RocketMqConsumerGateway';
import type { ConsumerGateway, ConsumerGatewayConfig } from '../broker/consumerGateway';
import { DeliveryObserver, type DeliveryObserverStats } from './DeliveryObserver';
import { outboxRows, prepareEvents, type PreparedEvent, type TransactEvent } from '../outbox/events';
import {
  JoinedTransactions,
  type JoinedCall,
  type JoinedTransaction,
  type PublishOutcome,
} from './joinedTransactions';
import {
  resolveDeliveryMode,
  resolveProducerOptions,
  type DeliveryMode,
  type ResolvedProducerOptions,
  type TransactionalProducerOptions,
} from './options';

export interface TransactResult<T> {
  result: T;
  txId: string;
  /** How the events go out: half messages, or outbox rows for the relay (also after a fallback). */
  delivery: DeliveryMode;
  /** Broker message ids of the half messages, in the order of the events; empty in outbox delivery. */
  messageIds: string[];
  /** Event ids (stable across retries and republishes), in the order of the events. */
  eventIds: string[];
}

/** What `work` learns about the transaction it runs in. */
export interface TransactionContext {
  readonly txId: string;
  /** Event ids, in the order of the events. */
  readonly eventIds: readonly string[];
}

/** Per-call options of transact(). */
export interface TransactOptions {
  /** Overrides the producer's `delivery` for this call. */
  delivery?: DeliveryMode;
}

/** Per-call options of publish(). */
export interface PublishOptions {
  /** Overrides the producer's `delivery` for this call. */
  delivery?: DeliveryMode;
}

/**
 * What publish() knows when it returns: the caller's transaction is still open, so nothing is
 * committed yet. The broker transaction ends after the caller's COMMIT or ROLLBACK; `outcome`
 * tells how (it never rejects). Delivery of a committed transaction does not depend on it:
 * the check-back reads tx_record, and the relay/discard recovery republish from outbox_event.
 */
export interface PublishResult {
  /** Shared by every publish() call in the same caller transaction (one tx_record row). */
  txId: string;
  /** How these events go out: half messages, or NEW outbox rows for the relay (also after a fallback). */
  delivery: DeliveryMode;
  /** Broker message ids of this call's half messages (not yet committed); empty in outbox delivery. */
  messageIds: string[];
  /** Event ids (stable across retries and republishes), in the order of the events. */
  eventIds: string[];
  /**
   * Settles once the caller's transaction is over and the broker was told (or the check-back was
   * left to decide). Stays pending if the transaction is never ended through its QueryRunner.
   */
  outcome: Promise<PublishOutcome>;
}

export type TransactionWork<T> = (manager: EntityManager, context: TransactionContext) => Promise<T>;

export interface ProducerStats {
  committed: number;
  rolledBack: number;
  fenced: number;
  outcomeUnknown: number;
  endTransactionFailures: number;
  /** Transactions committed with their events as NEW outbox rows because the broker was down. */
  outboxFallbacks: number;
  checkBack: Readonly<CheckBackStats>;
  /** The built-in discard recovery of this instance; null when it is off. */
  discardRecovery: Readonly<DiscardRecoveryStats> | null;
  /** confirmBy 'delivery': what the confirmation consumer saw; null otherwise. */
  deliveryConfirmations: Readonly<DeliveryObserverStats> | null;
}

/** @internal Seams for unit tests: a fake broker and store. */
export interface ProducerInternals {
  gateway?: (config: GatewayConfig, logger: Logger) => BrokerGateway;
  store?: TxRecordStore;
  /** null: write no outbox rows. Default: TypeORM, unless `store` is faked (then none). */
  outbox?: OutboxStore | null;
  /** The confirmation consumer of confirmBy 'delivery'. */
  consumerGateway?: (config: ConsumerGatewayConfig, logger: Logger) => ConsumerGateway;
}

/**
 * Sends half message(s), runs the local transaction with tx_record as its first row, then
 * commits or rolls back the message(s). Check-backs are resolved by the tx_record fence.
 */
export class TransactionalProducer {
  private readonly options: ResolvedProducerOptions;
  private readonly gateway: BrokerGateway;
  private readonly store: TxRecordStore;
  private readonly dispatcher: CheckBackDispatcher;
  private readonly outbox: OutboxStore | undefined;
  private readonly confirmations: ConfirmationBatcher;
  private readonly eventConfirmations: ConfirmationBatcher;
  private readonly recovery: DiscardRecovery | undefined;
  private readonly observer: DeliveryObserver | undefined;
  private readonly logger: Logger;
  private readonly lifecycle: Lifecycle;
  private readonly inFlight = new InFlight();
  private readonly observers = new Observers();
  /** Caller transactions joined by publish(), keyed by QueryRunner; told their end by TypeORM. */
  private readonly joined: JoinedTransactions;
  /** Errors thrown by `work` (told apart from the SDK's own failures in metrics). */
  private readonly workErrors = new WeakSet<object>();
  private readonly counters = {
    committed: 0,
    rolledBack: 0,
    fenced: 0,
    outcomeUnknown: 0,
    endTransactionFailures: 0,
    outboxFallbacks: 0,
  };

  constructor(options: TransactionalProducerOptions);
  /** @internal */
  constructor(options: TransactionalProducerOptions, internals?: ProducerInternals);
  constructor(options: TransactionalProducerOptions, internals: ProducerInternals = {}) {
    this.options = resolveProducerOptions(options);
    const o = this.options;
    this.logger = o.logger;
    const stores = storesFor(o.dataSource);
    this.store = internals.store ?? stores.txRecords;
    this.outbox =
      internals.outbox !== undefined
        ? (internals.outbox ?? undefined)
        : internals.store
          ? undefined
          : stores.outbox;
    this.dispatcher = new CheckBackDispatcher({
      producerGroup: o.producerGroup,
      builtIn: new TxRecordResolver(this.store, {
        producerGroup: o.producerGroup,
        lockWaitTimeoutMs: o.checkBack.lockWaitTimeoutMs,
        logger: o.logger,
        // A storm's checks batched: checkBack.concurrency batches at once, maxQueued waiting.
        batching: { concurrency: o.checkBack.concurrency, maxQueued: o.checkBack.maxQueued },
        // A COMMIT answer for our own half message confirms that event (recorded in batches),
        // unless only a delivery confirms (confirmBy 'delivery').
        onCommitAnswered: (eventId) => {
          if (o.confirmBy === 'endTransaction') this.eventConfirmations.add(eventId);
        },
      }),
      ...(o.checkBack.resolver ? { resolver: o.checkBack.resolver } : {}),
      onResolved: (outcome) => {
        this.observers.emit('checkBack', { producerGroup: o.producerGroup, outcome });
        o.checkBack.onResolved?.(outcome);
      },
      resolverScope: o.checkBack.resolverScope,
      concurrency: o.checkBack.concurrency,
      maxQueued: o.checkBack.maxQueued,
      logger: o.logger,
    });
    const config = gatewayConfig(
      o,
      (message) => this.dispatcher.handle(message),
      (message, resolution) => this.dispatcher.answerSent(message, resolution),
    );
    this.gateway = (internals.gateway ?? createGateway)(config, o.logger);
    this.confirmations = new ConfirmationBatcher((ids) => this.store.markConfirmed(ids), o.logger);
    const outbox = this.outbox;
    this.eventConfirmations = new ConfirmationBatcher(
      (ids) => (outbox ? outbox.markConfirmed(ids) : Promise.resolve()),
      o.logger,
    );
    if (outbox && o.confirmBy === 'delivery') {
      this.observer = new DeliveryObserver({
        gateway: (internals.consumerGateway ?? ((c, l) => new RocketMqConsumerGateway(c, l)))(
          confirmationConsumerConfig(o),
          o.logger,
        ),
        producerGroup: o.producerGroup,
        onEvent: (eventId) => this.eventConfirmations.add(eventId),
        onTransaction: (txId) => this.confirmations.add(txId),
        logger: o.logger,
      });
    }
    if (outbox && o.discardRecovery) {
      this.recovery = new DiscardRecovery({
        awaitDelivery: o.confirmBy === 'delivery',
        settings: o.discardRecovery,
        store: outbox,
        gateway: this.gateway,
        producerGroup: o.producerGroup,
        topics: o.topics,
        owner: `producer-${process.pid}-${uuidv7().slice(-12)}`,
        requestTimeoutMs: o.requestTimeoutMs,
        logger: o.logger,
        observers: this.observers,
      });
    }
    this.joined = new JoinedTransactions({
      committed: (joined) => this.endJoined(joined, this.finishJoinedCommit(joined)),
      rolledBack: (joined, ambiguous) => this.endJoined(joined, this.finishJoinedRollback(joined, ambiguous)),
      undone: (joined) =>
        this.endJoined(
          joined,
          this.endCalls(joined.txId, joined.calls, false).then(() => this.joinedRolledBack(joined)),
        ),
      failed: (err) => this.logger.error(errorFields(err), 'joined transaction handler failed'),
    });
    this.lifecycle = new Lifecycle(
      {
        component: 'producer',
        name: 'TransactionalProducer',
        shutdownTimeoutMs: o.shutdownTimeoutMs,
        logger: o.logger,
      },
      {
        precondition: () => (o.dataSource.isInitialized ? undefined : notInitialized()),
        open: async () => {
          await this.gateway.start();
          await this.observer?.start();
        },
        onRunning: () => {
          this.recovery?.start();
          this.logger.info(
            { endpoints: o.endpoints, producerGroup: o.producerGroup },
            'transactional producer started',
          );
        },
        drain: async (deadline) => {
          await deadline.within(
            this.inFlight.idle(),
            'shutdown did not drain in time; the fence resolves the rest',
            () => ({ inFlight: this.inFlight.size }),
          );
          // Recorded confirmations spare a republish (a duplicate) after the discard horizon: flush
          // them on every graceful path, within the budget, since a hung database must not keep
          // shutdown() pending.
          await deadline.within(
            Promise.all([this.recovery?.stop(), this.observer?.stop()]).then(() =>
              Promise.all([this.confirmations.flush(), this.eventConfirmations.flush()]),
            ),
            'confirmations not recorded in time; their events may be republished after the discard horizon',
          );
        },
        close: () => {
          this.joined.detach(o.dataSource);
          return this.gateway.shutdown();
        },
      },
    );
  }

  /** @internal Used by RocketMqTxMetrics.attach. */
  /** @internal */
  [ATTACH_OBSERVER](observer: TxObserver): () => void {
    return this.observers.add(observer);
  }

  /** A snapshot of the counters (a copy, nested objects too: changing it changes nothing). */
  get stats(): ProducerStats {
    return {
      ...this.counters,
      checkBack: { ...this.dispatcher.stats },
      discardRecovery: this.recovery ? this.recovery.stats : null,
      deliveryConfirmations: this.observer ? this.observer.stats : null,
    };
  }

  /**
   * Connects to the proxy; bounded by startTimeoutMs. Safe to call more than once: every call
   * gets the same promise. After shutdown() it rejects with ProducerNotRunningError.
   */
  start(): Promise<void> {
    return this.lifecycle.start();
  }

  /**
   * Runs `work` in a local transaction whose first statement records the transaction, between
   * half message(s) and their commit. Resolves after the broker commit was attempted; a failed
   * EndTransaction is left to the check-back (the events are still delivered).
   */
  async transact<T>(
    events: TransactEvent | readonly TransactEvent[],
    work: TransactionWork<T>,
    callOptions: TransactOptions = {},
  ): Promise<TransactResult<T>> {
    this.lifecycle.assertRunning();
    if (typeof work !== 'function') {
      throw new InvalidOptionError('work', work, 'a function (manager, { txId, eventIds }) => Promise');
    }
    const delivery = this.callDelivery('transact options', callOptions);
    const txId = uuidv7();
    const prepared = prepareEvents(events, txId, this.options);
    const started = performance.now();
    return this.inFlight.track(
      this.run(txId, prepared, work, delivery).then(
        (result) => {
          this.observeTransaction(txId, 'committed', result.delivery, started);
          return result;
        },
        (err: unknown) => {
          this.observeTransaction(txId, this.outcomeOf(err, txId), delivery, started, err);
          throw err;
        },
      ),
    );
  }

  /**
   * Publishes events inside the caller's own transaction, the one active on `manager`
   * (`dataSource.transaction(...)`, a `@Transactional()` method, a QueryRunner transaction).
   * Inserts the tx_record fence row through `manager` first (on the first call in that
   * transaction), sends the half message(s), writes the outbox rows, and returns with the
   * transaction still open. When the caller's QueryRunner commits, the half messages are
   * committed; when it rolls back, they are rolled back. Several calls in one transaction share
   * one txId and one fence row; a call in a deeper savepoint gets its own (rolled back with it). A failure throws here, inside the caller's transaction: let it
   * roll back. If the process dies after the caller's COMMIT, the check-back reads tx_record
   * and delivers the events: ending them after commit is only a speed-up.
   */
  async publish(
    manager: EntityManager,
    events: TransactEvent | readonly TransactEvent[],
    callOptions: PublishOptions = {},
  ): Promise<PublishResult> {
    this.lifecycle.assertRunning();
    const queryRunner = this.joinableRunner(manager);
    const requested = this.callDelivery('publish options', callOptions);
    let joined = this.joined.get(queryRunner);
    const txId = joined?.txId ?? uuidv7();
    // Validated and snapshotted before anything is written or sent.
    const prepared = prepareEvents(events, txId, this.options);
    if (!joined) {
      this.joined.attach(this.options.dataSource);
      const fresh = this.joined.join(queryRunner, txId, requested, performance.now());
      fresh.recorded = this.recordTransaction(manager, txId, prepared).catch((err: unknown) => {
        this.joined.forget(queryRunner, fresh);
        throw err;
      });
      joined = fresh;
    }
    await joined.recorded;
    const { delivery, halves } = await this.sendHalvesOrFallback(txId, prepared, requested);
    try {
      await this.writeOutboxRows(manager, txId, prepared, initialStatus(delivery));
    } catch (err) {
      // These events are not published, whatever the caller's transaction does next.
      await this.endAll(txId, halves, false);
      throw err;
    }
    const eventIds = prepared.map((p) => p.eventId);
    if (delivery !== 'transactional') joined.delivery = delivery;
    joined.calls.push({ halves, eventIds });
    return {
      txId,
      delivery,
      messageIds: halves.map((h) => h.messageId),
      eventIds,
      outcome: joined.outcome,
    };
  }

  /** The QueryRunner of the caller's active transaction on `manager`, or a typed refusal. */
  private joinableRunner(manager: EntityManager): QueryRunner {
    if (typeof manager !== 'object' || manager === null || !('connection' in manager)) {
      throw new InvalidOptionError('manager', manager, 'a TypeORM EntityManager inside a transaction');
    }
    if (manager.connection !== this.options.dataSource) {
      throw new InvalidOptionError('manager', manager, "an EntityManager of the producer's dataSource");
    }
    const queryRunner = manager.queryRunner;
    if (!queryRunner?.isTransactionActive || queryRunner.isReleased) throw new NoActiveTransactionError();
    return queryRunner;
  }

  private callDelivery(label: string, callOptions: TransactOptions | PublishOptions): DeliveryMode {
    if (typeof callOptions !== 'object' || callOptions === null) {
      throw new InvalidOptionError(label, callOptions, 'an object { delivery? }');
    }
    const delivery = resolveDeliveryMode('delivery', callOptions.delivery, this.options.delivery);
    if (delivery !== 'transactional' && !this.outbox) {
      throw new InvalidOptionError(
        'delivery',
        delivery,
        '"transactional" (this producer has no outbox store)',
      );
    }
    return delivery;
  }

  /** Runs the end of a joined transaction after TypeORM's event returned (tracked for shutdown). */
  private endJoined(joined: JoinedTransaction, end: Promise<PublishOutcome>): void {
    void this.inFlight.track(
      end
        .catch((err: unknown) => {
          this.logger.error({ ...errorFields(err), txId: joined.txId }, 'ending a joined transaction failed');
          return 'unknown' as const;
        })
        .then((outcome) => {
          const label: TransactionOutcomeLabel =
            outcome === 'committed'
              ? 'committed'
              : outcome === 'rolled_back'
                ? 'rolled_back'
                : 'outcome_unknown';
          this.observeTransaction(joined.txId, label, joined.delivery, joined.started);
          joined.settle(outcome);
        }),
    );
  }

  /**
   * The caller's COMMIT returned. Before committing the half messages, the fence row is read
   * on a fresh connection: a COMMIT can return although the database rolled back (PostgreSQL
   * answers an aborted transaction's COMMIT with ROLLBACK, and TypeORM reports it committed).
   */
  private async finishJoinedCommit(joined: JoinedTransaction): Promise<PublishOutcome> {
    const halves = joined.calls.flatMap((c) => c.halves);
    if (halves.length === 0) {
      this.counters.committed++;
      return 'committed';
    }
    let status: Awaited<ReturnType<TxRecordStore['readStatus']>>;
    try {
      status = await this.store.readStatus(joined.txId);
    } catch (err) {
      this.counters.outcomeUnknown++;
      this.logger.warn(
        { ...errorFields(err), txId: joined.txId },
        'could not read tx_record after the caller committed; the broker check-back will resolve it',
      );
      return 'unknown';
    }
    if (status !== 'COMMITTED') {
      await this.endCalls(joined.txId, joined.calls, false);
      return this.joinedRolledBack(joined);
    }
    this.counters.committed++;
    const acked = await this.finishCommitted(
      joined.txId,
      halves,
      joined.calls.flatMap((c) => c.eventIds),
    );
    return acked ? 'committed' : 'unknown';
  }

  private async finishJoinedRollback(joined: JoinedTransaction, ambiguous: boolean): Promise<PublishOutcome> {
    if (ambiguous) {
      // The COMMIT was sent and failed: it may be durable. Send nothing; the check-back reads the truth.
      this.counters.outcomeUnknown++;
      return 'unknown';
    }
    await this.endCalls(joined.txId, joined.calls, false);
    return this.joinedRolledBack(joined);
  }

  private joinedRolledBack(_joined: JoinedTransaction): PublishOutcome {
    this.counters.rolledBack++;
    return 'rolled_back';
  }

  private async endCalls(txId: string, calls: readonly JoinedCall[], commit: boolean): Promise<void> {
    await this.endAll(
      txId,
      calls.flatMap((c) => c.halves),
      commit,
    );
  }

  private observeTransaction(
    txId: string,
    outcome: TransactionOutcomeLabel,
    delivery: DeliveryMode,
    started: number,
    error?: unknown,
  ): void {
    const producerGroup = this.options.producerGroup;
    const durationMs = elapsedMs(started);
    this.observers.emit('transaction', { producerGroup, outcome, delivery, durationMs });
    const result = { txId, outcome, delivery, durationMs, ...(outcome === 'committed' ? {} : { error }) };
    callHook(this.options.onOutcome, result, this.logger, 'onOutcome');
  }

  private outcomeOf(err: unknown, txId: string): TransactionOutcomeLabel {
    if (typeof err === 'object' && err !== null && this.workErrors.has(err)) return 'rolled_back';
    if (err instanceof TransactionFencedError && err.txId === txId) return 'fenced';
    if (err instanceof TransactionOutcomeUnknownError && err.txId === txId) return 'outcome_unknown';
    // Not an object: only `work` throws such things.
    return typeof err === 'object' && err !== null ? 'failed' : 'rolled_back';
  }

  private async run<T>(
    txId: string,
    prepared: PreparedEvent[],
    work: TransactionWork<T>,
    requested: DeliveryMode,
  ): Promise<TransactResult<T>> {
    const { delivery, halves } = await this.sendHalvesOrFallback(txId, prepared, requested);
    const local = await this.runLocal(txId, prepared, work, initialStatus(delivery));
    // The connection is back in the pool before any broker round trip.
    if (local.kind === 'committed') {
      this.counters.committed++;
      const eventIds = prepared.map((p) => p.eventId);
      await this.finishCommitted(txId, halves, eventIds);
      return { result: local.result, txId, delivery, messageIds: halves.map((h) => h.messageId), eventIds };
    }
    if (local.kind === 'rolled-back') await this.endAll(txId, halves, false);
    throw local.error;
  }

  /**
   * Sends the half message(s) in transactional delivery; with the outbox fallback, a broker that
   * cannot take them turns this call into outbox delivery (no half messages).
   */
  private async sendHalvesOrFallback(
    txId: string,
    prepared: PreparedEvent[],
    requested: DeliveryMode,
  ): Promise<{ delivery: DeliveryMode; halves: HalfMessage[] }> {
    if (requested !== 'transactional') return { delivery: requested, halves: [] };
    try {
      return { delivery: requested, halves: await this.sendHalves(txId, prepared) };
    } catch (err) {
      if (!(err instanceof BrokerUnavailableError && this.options.outboxFallback && this.outbox)) throw err;
      // Documented trade-off: the business commits now; delivery waits for the relay.
      this.logger.warn({ ...errorFields(err), txId }, 'half message failed; falling back to the outbox');
      this.counters.outboxFallbacks++;
      this.observers.emit('outboxFallback', { producerGroup: this.options.producerGroup });
      return { delivery: 'outbox', halves: [] };
    }
  }

  /** Commits the half messages of a committed transaction and records what the broker acknowledged. */
  private async finishCommitted(txId: string, halves: HalfMessage[], eventIds: string[]): Promise<boolean> {
    if (halves.length === 0) return true;
    const acked = await this.endAll(txId, halves, true);
    const all = acked.every(Boolean);
    // confirmBy 'delivery': the proxy's OK proves nothing (Cluster mode); the observer confirms.
    if (this.options.confirmBy === 'endTransaction') {
      acked.forEach((ok, i) => ok && this.eventConfirmations.add(eventIds[i]!));
      if (all) this.confirmations.add(txId);
    }
    return all;
  }

  /**
   * The fence row, the first statement of the local transaction. Throws a StoreError, or
   * TransactionFencedError when a check-back already decided ROLLBACK for txId.
   */
  private async recordTransaction(
    manager: EntityManager,
    txId: string,
    prepared: PreparedEvent[],
  ): Promise<void> {
    let inserted: boolean;
    try {
      inserted = await this.store.insertCommitted(manager, {
        txId,
        producerGroup: this.options.producerGroup,
        topic: prepared[0]!.message.topic,
        eventCount: prepared.length,
      });
    } catch (err) {
      throw toStoreError(`could not insert tx_record ${txId}`, err);
    }
    if (!inserted) {
      this.counters.fenced++;
      throw new TransactionFencedError(txId);
    }
  }

  /** The outbox_event rows of the events (none when this producer has no outbox store). */
  private async writeOutboxRows(
    manager: EntityManager,
    txId: string,
    prepared: PreparedEvent[],
    status: OutboxInitialStatus,
  ): Promise<void> {
    if (!this.outbox) return;
    try {
      await this.outbox.insertEvents(manager, outboxRows(txId, prepared, status));
    } catch (err) {
      throw err instanceof RocketMqTxError
        ? err
        : toStoreError(`could not insert outbox_event rows of ${txId}`, err);
    }
  }

  /** The local transaction; never touches the broker. */
  private async runLocal<T>(
    txId: string,
    prepared: PreparedEvent[],
    work: TransactionWork<T>,
    outboxStatus: OutboxInitialStatus,
  ): Promise<{ kind: 'committed'; result: T } | { kind: 'rolled-back' | 'ambiguous'; error: unknown }> {
    const queryRunner = this.options.dataSource.createQueryRunner();
    try {
      try {
        await queryRunner.connect();
        await queryRunner.startTransaction();
      } catch (err) {
        return {
          kind: 'rolled-back',
          error: toStoreError(`could not open a database transaction for ${txId}`, err),
        };
      }
      try {
        await this.recordTransaction(queryRunner.manager, txId, prepared);
        await this.writeOutboxRows(queryRunner.manager, txId, prepared, outboxStatus);
      } catch (err) {
        await this.abandonLocal(queryRunner, txId);
        return { kind: 'rolled-back', error: err };
      }
      let result: T;
      try {
        result = await work(queryRunner.manager, { txId, eventIds: prepared.map((p) => p.eventId) });
      } catch (userError) {
        await this.abandonLocal(queryRunner, txId);
        this.counters.rolledBack++;
        if (typeof userError === 'object' && userError !== null) this.workErrors.add(userError);
        return { kind: 'rolled-back', error: userError };
      }
      try {
        await queryRunner.commitTransaction();
      } catch (err) {
        // Ambiguous: the row may or may not be durable. Send nothing; the check-back reads the truth.
        // If the COMMIT never went out the transaction is still open: end it before release.
        await this.abandonLocal(queryRunner, txId);
        this.counters.outcomeUnknown++;
        return { kind: 'ambiguous', error: new TransactionOutcomeUnknownError(txId, err) };
      }
      return { kind: 'committed', result };
    } finally {
      await queryRunner.release().catch(() => undefined);
    }
  }

  /** One half message per event (the client holds one message per transaction), in parallel. */
  private async sendHalves(txId: string, prepared: PreparedEvent[]): Promise<HalfMessage[]> {
    const settled = await Promise.allSettled(prepared.map((p) => this.gateway.sendHalf(p.message)));
    const sent = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (!failed) return sent;
    // Nothing is in the database for txId: ROLLBACK is safe, and if it is lost the fence rolls back.
    await this.endAll(txId, sent, false);
    const err: unknown = failed.reason;
    if (err instanceof RocketMqTxError) throw err;
    throw new BrokerUnavailableError(`half message for transaction ${txId} was not accepted`, err);
  }

  /** Best effort; returns, per half message, whether its EndTransaction was acknowledged. Never throws. */
  private async endAll(txId: string, halves: HalfMessage[], commit: boolean): Promise<boolean[]> {
    const results = await Promise.allSettled(halves.map((h) => this.gateway.endTransaction(h, commit)));
    for (const r of results) {
      if (r.status === 'rejected') {
        this.counters.endTransactionFailures++;
        this.observers.emit('endTransactionFailed', { producerGroup: this.options.producerGroup });
        this.logger.warn(
          { ...errorFields(r.reason), txId, commit },
          'EndTransaction failed; the broker check-back will resolve it',
        );
      }
    }
    return results.map((r) => r.status === 'fulfilled');
  }

  /**
   * Ends the local transaction without committing it. TypeORM's rollbackTransaction can fail
   * before it sends anything (a throwing subscriber); a raw ROLLBACK skips subscribers, and if
   * that fails too the connection is destroyed, so it never returns to the pool with the
   * transaction open (the next borrower would commit it).
   */
  private async abandonLocal(queryRunner: QueryRunner, txId: string): Promise<void> {
    await abandonTransaction(queryRunner, (step, err) =>
      this.logger.warn(
        { ...errorFields(err), txId },
        step === 'rollback'
          ? 'local rollback failed; sending a raw ROLLBACK'
          : 'raw ROLLBACK failed; destroying the connection',
      ),
    );
  }

  /**
   * Stops new transactions, waits for in-flight ones, flushes confirmations and closes the
   * client; all of it within one shutdownTimeoutMs budget. Every call gets the same promise.
   * Never rejects, even when the proxy or the database is down.
   */
  shutdown(): Promise<void> {
    return this.lifecycle.shutdown();
  }
}

/** The status of a transaction's outbox rows: IN_FLIGHT under a half message, NEW for the relay, CDC for the binlog reader. */
function initialStatus(delivery: DeliveryMode): OutboxInitialStatus {
  return delivery === 'transactional' ? 'IN_FLIGHT' : delivery === 'outbox' ? 'NEW' : 'CDC';
}

/** The confirmation consumer of confirmBy 'delivery': group <producerGroup>_confirm on the producer's topics. */
function confirmationConsumerConfig(o: ResolvedProducerOptions): ConsumerGatewayConfig {
  return {
    ...connectionFields(o),
    consumerGroup: `${o.producerGroup}_confirm`,
    subscriptions: new Map(o.topics.map((t) => [t, '*'])),
    // The proxy's minimum (grpcClientConsumerMinLongPollingTimeoutMillis); shutdown does not wait
    // for it (the observer closes its client first).
    longPollingMs: 5000,
    invisibleDurationMs: 30_000,
  };
}
