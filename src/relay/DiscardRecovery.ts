import type { BrokerGateway } from '../broker/gateway';
import type { ClaimedOutboxEvent, OutboxStore } from '../store/ports';
import { toStoreError } from '../store/typeorm/storeError';
import { errorFields, type Logger } from '../util/logger';
import type { Observers } from '../observability/observer';
import { backoffDelay, type BackoffPolicy } from './backoff';
import { errorText, outboxMessage, sendCommitted } from './republish';

export interface DiscardRecoverySettings {
  /** Age (from the local commit) past which an unconfirmed IN_FLIGHT event is republished. */
  horizonMs: number;
  /** Pause between rounds (jittered ±50 % so the instances of a group do not align). */
  intervalMs: number;
  /** Rows leased per round (a full round runs again at once). */
  batchSize: number;
  /** How long a leased row is this instance's; a killed instance's rows are taken after it. */
  leaseMs: number;
  /** Retry schedule of a failed republish (the row stays IN_FLIGHT, leased until the retry). */
  backoff: BackoffPolicy;
}

export interface DiscardRecoveryStats {
  /** Rounds run. */
  rounds: number;
  /** Events republished and marked SENT. */
  republished: number;
  /** Republishes that failed and were rescheduled. */
  failed: number;
  /** Database errors of the recovery (claim, mark). */
  storeErrors: number;
}

interface Deps {
  /**
   * confirmBy 'delivery': a republish acknowledged by the proxy is not marked SENT (a proxy in
   * Cluster mode acknowledges a commit it forwarded one way); the row stays IN_FLIGHT, leased for
   * another horizon, until the confirmation consumer sees the event delivered.
   */
  awaitDelivery?: boolean;
  settings: DiscardRecoverySettings;
  store: OutboxStore;
  gateway: BrokerGateway;
  producerGroup: string;
  topics: readonly string[];
  /** Lease owner of this instance (outbox_event.lease_owner, at most 64 characters). */
  owner: string;
  requestTimeoutMs: number;
  logger: Logger;
  observers: Observers;
  random?: () => number;
}

/**
 * The producer's built-in discard recovery. The broker gives up on a half message after its check
 * maximum (TRANS_CHECK_MAX_TIME_TOPIC, a log line and nothing else), e.g. when its checks went to
 * channels of killed instances. Every instance of a producer group runs this loop over the
 * group's own rows: IN_FLIGHT events of COMMITTED transactions older than the horizon are leased
 * (SKIP LOCKED: instances and relays share the rows, never send one at the same time) and sent
 * again as a committed message with the same eventId, then marked SENT.
 */
export class DiscardRecovery {
  private readonly stats_: DiscardRecoveryStats = { rounds: 0, republished: 0, failed: 0, storeErrors: 0 };
  private readonly random: () => number;
  private timer: NodeJS.Timeout | undefined;
  private current: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly deps: Deps) {
    this.random = deps.random ?? Math.random;
  }

  get stats(): Readonly<DiscardRecoveryStats> {
    return { ...this.stats_ };
  }

  /** Schedules the first round at a random point of the first interval. */
  start(): void {
    if (this.stopped || this.timer || this.current) return;
    this.schedule(this.random() * this.deps.settings.intervalMs);
  }

  /** Stops scheduling and waits for the round under way (its sends are bounded by timeouts). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.current;
  }

  /** One round: lease up to batchSize rows, republish them. Resolves with how many were leased. */
  async runOnce(): Promise<number> {
    const { settings, store, producerGroup, topics, owner } = this.deps;
    this.stats_.rounds++;
    let rows: ClaimedOutboxEvent[];
    try {
      rows = await store.claimUnconfirmed({
        producerGroup,
        horizonMs: settings.horizonMs,
        limit: settings.batchSize,
        leaseMs: settings.leaseMs,
        owner,
        topics,
      });
    } catch (err) {
      this.storeError('discard recovery claim failed', err);
      return 0;
    }
    if (rows.length > 0) {
      this.deps.logger.warn(
        { producerGroup, count: rows.length },
        'republishing events whose broker commit was not confirmed within the discard horizon',
      );
      await Promise.all(rows.map((row) => this.republish(row)));
    }
    return rows.length;
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.current = this.drain().finally(() => {
        this.current = undefined;
        if (!this.stopped) this.schedule(this.deps.settings.intervalMs * (0.5 + this.random()));
      });
    }, delayMs);
    this.timer.unref();
  }

  private async drain(): Promise<void> {
    while (!this.stopped && (await this.runOnce()) >= this.deps.settings.batchSize) {
      // A full round: more rows are due.
    }
  }

  private async republish(row: ClaimedOutboxEvent): Promise<void> {
    const { store, gateway, owner, producerGroup, requestTimeoutMs, logger, observers } = this.deps;
    try {
      // Transactional delivery wrote this row, so its topic is of type TRANSACTION.
      await sendCommitted(gateway, outboxMessage(row, false), true, requestTimeoutMs * 3);
    } catch (err) {
      this.stats_.failed++;
      observers.emit('discardRecovery', { producerGroup, result: 'retry' });
      logger.warn(
        { ...errorFields(err), eventId: row.eventId, attempts: row.attempts + 1 },
        'republishing an unconfirmed event failed; retrying with backoff',
      );
      const retryInMs = backoffDelay(row.attempts, this.deps.settings.backoff, this.random);
      await this.write(() => store.releaseUnconfirmed(row.eventId, owner, errorText(err), retryInMs));
      return;
    }
    this.stats_.republished++;
    observers.emit('discardRecovery', { producerGroup, result: 'republished' });
    if (this.deps.awaitDelivery) {
      const note =
        'republished; SENT once delivered (confirmBy delivery), else republished again after the horizon';
      await this.write(() =>
        store.releaseUnconfirmed(row.eventId, owner, note, this.deps.settings.horizonMs),
      );
      return;
    }
    // A lost mark is safe: the lease expires and the event is sent again with the same eventId.
    await this.write(() => store.markSent(row.eventId, owner));
  }

  private async write(fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      this.storeError('recording a republish failed', err);
    }
  }

  private storeError(what: string, err: unknown): void {
    this.stats_.storeErrors++;
    this.deps.logger.warn(errorFields(toStoreError(what, err)), `${what}; retrying at the next round`);
  }
}
