import { notInitialized } from '../util/clientOptions';
import { Lifecycle, callHook } from '../lifecycle/Lifecycle';
import { gatewayConfig, type BrokerGateway, type GatewayConfig } from '../broker/gateway';
import { createGateway } from '../broker/createGateway';
import type { ClaimedOutboxEvent, OutboxStore, TxStatusReader } from '../store/ports';
import { answerFromRecord } from './readOnlyCheckBack';
import { ConfirmationBatcher } from '../util/ConfirmationBatcher';
import { EVENT_ID_PROPERTY, TransactionResolution } from '../checkback/resolution';
import { storesFor } from '../store';
import { toStoreError } from '../store/typeorm/storeError';
import { errorFields, type Logger } from '../util/logger';
import { ATTACH_OBSERVER, Observers, type TxObserver } from '../observability/observer';
import { retryDelay } from '../util/retryPolicy';
import { errorText, outboxMessage, sendCommitted } from './republish';
import type { RelayOutcome } from './outcome';
import { resolveRelayOptions, type OutboxRelayOptions, type ResolvedRelayOptions } from './options';

export interface RelayStats {
  /** Rows leased by this relay. */
  claimed: number;
  /** Rows delivered and marked SENT. */
  sent: number;
  /** Sends that failed and were rescheduled. */
  failed: number;
  /** Rows that reached maxAttempts and became DEAD. */
  dead: number;
  /** IN_FLIGHT rows whose broker commit was never confirmed, queued for republishing. */
  republished: number;
  /** Database errors of the relay itself (claim, mark, reconcile). */
  storeErrors: number;
}

/** @internal Seams for tests: a fake or wrapped broker and store. */
export interface RelayInternals {
  gateway?: (config: GatewayConfig, logger: Logger) => BrokerGateway;
  store?: OutboxStore;
  txStatus?: TxStatusReader;
  random?: () => number;
}

/**
 * Delivers outbox_event rows: claims due NEW rows in short SKIP LOCKED transactions under a
 * lease, sends them outside any transaction, marks them SENT; retries with capped exponential
 * backoff and ends in DEAD past maxAttempts. Any number of relays may run against one table.
 */
export class OutboxRelay {
  private readonly counters: RelayStats = {
    claimed: 0,
    sent: 0,
    failed: 0,
    dead: 0,
    republished: 0,
    storeErrors: 0,
  };
  private readonly options: ResolvedRelayOptions;
  private readonly gateway: BrokerGateway;
  private readonly store: OutboxStore;
  private readonly logger: Logger;
  private readonly random: () => number;
  private readonly lifecycle: Lifecycle;
  private loop: Promise<void> = Promise.resolve();
  private wake: (() => void) | undefined;
  private lastReconcile = 0;
  private readonly observers = new Observers();
  private readonly confirmations: ConfirmationBatcher;

  constructor(options: OutboxRelayOptions);
  /** @internal */
  constructor(options: OutboxRelayOptions, internals?: RelayInternals);
  constructor(options: OutboxRelayOptions, internals: RelayInternals = {}) {
    this.options = resolveRelayOptions(options);
    const o = this.options;
    this.logger = o.logger;
    this.random = internals.random ?? Math.random;
    const stores = storesFor(o.dataSource);
    this.store = internals.store ?? stores.outbox;
    // The proxy registers every client that declares a topic as a check-back target of it (the
    // group is the topic), so checks reach the relay too; an unanswered one still counts against
    // the broker's check maximum. Answer what the database already decided; never fence.
    // A COMMIT answer confirms the event, as a producer's does, so it is not republished later.
    const reader = internals.txStatus ?? stores.txRecords;
    this.confirmations = new ConfirmationBatcher((ids) => this.store.markConfirmed(ids), o.logger);
    // Confirmed once the COMMIT answer reached the proxy (EndTransaction returned OK), not before.
    const config = gatewayConfig(
      o,
      (message) => answerFromRecord(reader, message, this.logger),
      (message, answer) => {
        const eventId = message.properties[EVENT_ID_PROPERTY];
        if (answer === TransactionResolution.COMMIT && eventId) this.confirmations.add(eventId);
      },
    );
    this.gateway = (internals.gateway ?? createGateway)(config, o.logger);
    this.lifecycle = new Lifecycle(
      { component: 'relay', name: 'OutboxRelay', shutdownTimeoutMs: o.shutdownTimeoutMs, logger: o.logger },
      {
        precondition: () => (o.dataSource.isInitialized ? undefined : notInitialized()),
        open: () => this.gateway.start(),
        onRunning: () => {
          this.loop = this.run();
          this.logger.info({ relayId: o.relayId }, 'outbox relay started');
        },
        onStopping: () => this.wake?.(),
        drain: async (deadline) => {
          await deadline.within(this.loop, 'relay round did not finish in time; its leases will expire');
          await deadline.within(this.confirmations.flush(), 'check-back confirmations not recorded in time');
        },
        close: () => this.gateway.shutdown(),
      },
    );
  }

  /** @internal Used by RocketMqTxMetrics.attach. */
  /** @internal */
  [ATTACH_OBSERVER](observer: TxObserver): () => void {
    return this.observers.add(observer);
  }

  get relayId(): string {
    return this.options.relayId;
  }

  /** A snapshot of the counters (a copy: changing it changes nothing). */
  get stats(): RelayStats {
    return { ...this.counters };
  }

  /**
   * Connects to the proxy and starts polling. Safe to call more than once: every call gets the
   * same promise. A shutdown() begun meanwhile wins: the relay ends stopped, its client closed.
   * After shutdown() it rejects with RelayNotRunningError.
   */
  start(): Promise<void> {
    return this.lifecycle.start();
  }

  /**
   * One claim-send-mark round; resolves with the number of rows claimed. Used by the polling
   * loop, and callable directly (e.g. from a job) on a started relay.
   */
  async runOnce(): Promise<number> {
    const rows = await this.claimBatch();
    if (rows.length > 0) await this.sendBatch(rows);
    return rows.length;
  }

  /** Leases up to batchSize due rows; a database error counts, is logged and yields none. */
  private async claimBatch(): Promise<ClaimedOutboxEvent[]> {
    const o = this.options;
    let rows: ClaimedOutboxEvent[];
    try {
      rows = await this.store.claim({
        limit: o.batchSize,
        leaseMs: o.leaseMs,
        owner: o.relayId,
        topics: o.topics,
      });
    } catch (err) {
      this.counters.storeErrors++;
      this.logger.warn(
        errorFields(toStoreError('outbox claim failed', err)),
        'outbox claim failed; retrying at the next poll',
      );
      return [];
    }
    this.counters.claimed += rows.length;
    return rows;
  }

  /** Sends a claimed batch and marks what reached the broker. Never rejects. */
  private async sendBatch(rows: readonly ClaimedOutboxEvent[]): Promise<void> {
    const sent = (await Promise.all(rows.map((row) => this.deliver(row)))).filter(
      (row): row is ClaimedOutboxEvent => row !== undefined,
    );
    // One UPDATE for every row of the batch that reached the broker, not one per row.
    if (sent.length > 0) {
      await this.mark(() =>
        this.store.markSentMany(
          sent.map((row) => row.eventId),
          this.options.relayId,
        ),
      );
    }
    for (const row of sent) {
      this.report({ eventId: row.eventId, topic: row.topic, result: 'sent', attempts: row.attempts + 1 });
    }
  }

  /**
   * Discard reconciliation, once: queues IN_FLIGHT rows past discardHorizonMs whose transaction
   * committed for republishing (same eventId). Resolves with how many were queued.
   */
  async reconcileDiscarded(): Promise<number> {
    try {
      const { discardHorizonMs, batchSize, topics } = this.options;
      const n = await this.store.promoteUnconfirmed(discardHorizonMs, batchSize, topics);
      if (n > 0) {
        this.counters.republished += n;
        this.observers.emit('relayRepublished', { count: n });
        this.logger.warn({ count: n }, 'republishing events whose broker commit was never confirmed');
      }
      return n;
    } catch (err) {
      this.counters.storeErrors++;
      this.logger.warn(
        errorFields(toStoreError('discard reconciliation failed', err)),
        'discard reconciliation failed; retrying later',
      );
      return 0;
    }
  }

  /** DEAD rows (all, or the given event ids) go back to NEW with attempts reset. */
  replayDead(eventIds?: readonly string[]): Promise<number> {
    return this.store.replayDead(eventIds);
  }

  /**
   * Stops polling, waits for the current round and flushes confirmations, closes the client; all
   * of it within one shutdownTimeoutMs budget. Every call gets the same promise. Never rejects.
   */
  shutdown(): Promise<void> {
    return this.lifecycle.shutdown();
  }

  /**
   * The polling loop. A full batch is followed by the next claim at once, while up to
   * batchesInFlight batches are still being sent and marked (claims overlap sends); a batch that
   * is not full means the table is drained, so the loop waits pollIntervalMs.
   */
  private async run(): Promise<void> {
    const o = this.options;
    const inFlight = new Set<Promise<void>>();
    while (this.lifecycle.isRunning) {
      if (o.reconcileDiscarded && Date.now() - this.lastReconcile >= o.reconcileIntervalMs) {
        this.lastReconcile = Date.now();
        await this.reconcileDiscarded();
      }
      while (inFlight.size >= o.batchesInFlight) await Promise.race(inFlight);
      if (!this.lifecycle.isRunning) break;
      const rows = await this.claimBatch();
      if (rows.length > 0) {
        const batch: Promise<void> = this.sendBatch(rows).finally(() => inFlight.delete(batch));
        inFlight.add(batch);
      }
      if (rows.length < o.batchSize && this.lifecycle.isRunning) await this.sleep(o.pollIntervalMs);
    }
    await Promise.all(inFlight);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }

  /** Sends one row; resolves with it when the broker has it (marked SENT by the caller, per batch). */
  private async deliver(row: ClaimedOutboxEvent): Promise<ClaimedOutboxEvent | undefined> {
    const o = this.options;
    try {
      await sendCommitted(
        this.gateway,
        outboxMessage(row, o.fifoTopics.has(row.topic)),
        o.transactionTopics.has(row.topic),
        o.requestTimeoutMs * 3,
      );
    } catch (err) {
      const attempts = row.attempts + 1;
      const dead = attempts >= o.maxAttempts;
      const retryInMs = retryDelay(row.attempts, o.retry, this.random);
      if (dead) this.counters.dead++;
      else this.counters.failed++;
      this.observers.emit('relayDelivery', { topic: row.topic, result: dead ? 'dead' : 'retry' });
      this.logger[dead ? 'error' : 'warn'](
        { ...errorFields(err), eventId: row.eventId, attempts },
        dead ? 'outbox event is DEAD after maxAttempts' : 'outbox send failed; retrying with backoff',
      );
      await this.mark(() => this.store.markFailed(row.eventId, o.relayId, errorText(err), retryInMs, dead));
      this.report({
        eventId: row.eventId,
        topic: row.topic,
        result: dead ? 'dead' : 'retry',
        attempts,
        error: err,
        ...(dead ? {} : { retryInMs }),
      });
      return undefined;
    }
    this.counters.sent++;
    this.observers.emit('relayDelivery', { topic: row.topic, result: 'sent' });
    return row;
  }

  private report(outcome: RelayOutcome): void {
    callHook(this.options.onOutcome, outcome, this.logger, 'onOutcome');
  }

  /** A lost mark is safe: the lease expires and the row is sent again with the same eventId. */
  private async mark(write: () => Promise<void>): Promise<void> {
    try {
      await write();
    } catch (err) {
      this.counters.storeErrors++;
      this.logger.warn(
        errorFields(toStoreError('recording an outbox outcome failed', err)),
        'could not record an outbox outcome; the lease will expire',
      );
    }
  }
}
