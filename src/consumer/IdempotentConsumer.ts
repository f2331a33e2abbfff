import { notInitialized } from '../util/clientOptions';
import { InFlight, Lifecycle, callHook } from '../lifecycle/Lifecycle';
import { retryDelay } from '../util/retryPolicy';
import type { ConsumerGateway, ConsumerGatewayConfig, InboundMessage } from '../broker/consumerGateway';
import { RocketMqConsumerGateway } from '../broker/RocketMqConsumerGateway';
import { connectionFields } from '../broker/gateway';
import { errorFields, type Logger } from '../util/logger';
import type { InboxStore } from '../store/ports';
import { MessageProcessor, type Decision } from './MessageProcessor';
import {
  resolveConsumerOptions,
  type IdempotentConsumerOptions,
  type ResolvedConsumerOptions,
} from './options';
import { ACKED_KINDS, type ConsumeOutcome } from './outcome';
import { ReceiveSlots } from './ReceiveSlots';
import { storesFor } from '../store';
import { ATTACH_OBSERVER, Observers, elapsedMs, type TxObserver } from '../observability/observer';

export interface ConsumerStats {
  received: number;
  applied: number;
  duplicates: number;
  stale: number;
  ignored: number;
  gapsHeld: number;
  gapsAccepted: number;
  malformed: number;
  unhandled: number;
  handlerFailures: number;
  storeFailures: number;
  /** Messages this consumer moved to %DLQ%<group> (malformed, or past the max delivery attempts). */
  deadLettered: number;
  /** Settle calls (ack, redeliver, dead-letter) the proxy did not accept; the broker redelivers. */
  settleFailures: number;
  receiveFailures: number;
}

/** @internal Seams for unit tests: a fake broker and store. */
export interface ConsumerInternals {
  gateway?: (config: ConsumerGatewayConfig, logger: Logger) => ConsumerGateway;
  store?: InboxStore;
}

const RECEIVE_FAILURE_BACKOFF_MS = 1000;
const CONFLICT_RETRY_MS = 1000;
const MAX_BATCH = 32;

/**
 * Applies each event once and in aggregateVersion order per aggregate: consumed_event,
 * aggregate_cursor and the handler's writes commit in one transaction, then the message is
 * acked. Failures are redelivered with backoff and end in the broker's dead-letter queue.
 */
export class IdempotentConsumer {
  private readonly options: ResolvedConsumerOptions;
  private readonly gateway: ConsumerGateway;
  private readonly processor: MessageProcessor;
  private readonly store: InboxStore;
  private readonly slots: ReceiveSlots;
  private readonly logger: Logger;
  private readonly lifecycle: Lifecycle;
  private readonly handling = new InFlight();
  private readonly observers = new Observers();
  private readonly counters: ConsumerStats = {
    received: 0,
    applied: 0,
    duplicates: 0,
    stale: 0,
    ignored: 0,
    gapsHeld: 0,
    gapsAccepted: 0,
    malformed: 0,
    unhandled: 0,
    handlerFailures: 0,
    storeFailures: 0,
    deadLettered: 0,
    settleFailures: 0,
    receiveFailures: 0,
  };

  constructor(options: IdempotentConsumerOptions);
  /** @internal */
  constructor(options: IdempotentConsumerOptions, internals?: ConsumerInternals);
  constructor(options: IdempotentConsumerOptions, internals: ConsumerInternals = {}) {
    this.options = resolveConsumerOptions(options);
    const o = this.options;
    this.logger = o.logger;
    this.store = internals.store ?? storesFor(o.dataSource).inbox;
    this.processor = new MessageProcessor(this.store, {
      consumerGroup: o.consumerGroup,
      registry: o.registry,
      gapPolicy: o.gapPolicy,
      unknownEventTypes: o.unknownEventTypes,
      maxBodyBytes: o.maxBodyBytes,
    });
    this.slots = new ReceiveSlots(o.concurrency);
    const config: ConsumerGatewayConfig = {
      ...connectionFields(o),
      consumerGroup: o.consumerGroup,
      subscriptions: o.subscriptions,
      longPollingMs: o.longPollingMs,
      invisibleDurationMs: o.invisibleDurationMs,
    };
    this.gateway = (internals.gateway ?? ((c, l) => new RocketMqConsumerGateway(c, l)))(config, o.logger);
    this.lifecycle = new Lifecycle(
      {
        component: 'consumer',
        name: 'IdempotentConsumer',
        shutdownTimeoutMs: o.shutdownTimeoutMs,
        logger: o.logger,
      },
      {
        precondition: () => (o.dataSource.isInitialized ? undefined : notInitialized()),
        open: () => this.gateway.start(),
        onRunning: () => {
          // One receive loop per subscription, so a quiet topic's long poll does not delay another.
          for (let i = 0; i < o.subscriptions.size; i++) void this.receiveLoop();
          this.logger.info(
            { consumerGroup: o.consumerGroup, topics: [...o.subscriptions.keys()] },
            'idempotent consumer started',
          );
        },
        onStopping: () => this.slots.close(),
        drain: (deadline) =>
          deadline.within(
            this.handling.idle(),
            'shutdown did not drain in time; unsettled messages will be redelivered',
            () => ({ pending: this.handling.size }),
          ),
        close: () => this.gateway.shutdown(),
      },
    );
  }

  /** @internal Used by RocketMqTxMetrics.attach. */
  /** @internal */
  [ATTACH_OBSERVER](observer: TxObserver): () => void {
    return this.observers.add(observer);
  }

  /** A snapshot of the counters (a copy: changing it changes nothing). */
  get stats(): ConsumerStats {
    return { ...this.counters };
  }

  /**
   * Connects and starts receiving; bounded by startTimeoutMs. Safe to call more than once: every
   * call gets the same promise. After shutdown() it rejects with ConsumerNotRunningError.
   */
  start(): Promise<void> {
    return this.lifecycle.start();
  }

  /**
   * Stops receiving, lets in-flight handlers finish and settle, then closes the client; all of it
   * within one shutdownTimeoutMs budget. Every call gets the same promise. Never rejects.
   * Messages of a long poll still open at that moment stay invisible for invisibleDurationMs and
   * are then redelivered.
   */
  shutdown(): Promise<void> {
    return this.lifecycle.shutdown();
  }

  private async receiveLoop(): Promise<void> {
    const o = this.options;
    // At most a fair share per receive, so every subscription can long-poll at once when it fits.
    const share = Math.max(1, Math.min(MAX_BATCH, Math.floor(o.concurrency / o.subscriptions.size)));
    while (this.lifecycle.isRunning) {
      const reserved = await this.slots.reserve(share);
      if (!this.lifecycle.isRunning) {
        this.slots.release(reserved);
        return;
      }
      let messages: InboundMessage[];
      try {
        messages = await this.gateway.receive(reserved);
      } catch (err) {
        this.slots.release(reserved);
        if (!this.lifecycle.isRunning) return;
        this.counters.receiveFailures++;
        this.logger.warn(errorFields(err), 'receive failed; retrying');
        await sleep(RECEIVE_FAILURE_BACKOFF_MS);
        continue;
      }
      // Each message keeps its slot until settled; the rest of the reservation is free again.
      this.slots.release(reserved - messages.length);
      for (const message of messages) this.dispatch(message);
    }
  }

  private dispatch(message: InboundMessage): void {
    this.counters.received++;
    void this.handling.track(this.handle(message).finally(() => this.slots.release(1)));
  }

  private async handle(message: InboundMessage): Promise<void> {
    const started = performance.now();
    let decision: Decision;
    try {
      decision = await this.processor.process(message);
    } catch (err) {
      // process() reports failures as decisions; this is a bug guard, never an ack.
      decision = { kind: 'MALFORMED', error: err };
    }
    const deadLettered = await this.settle(message, decision);
    this.count(decision, deadLettered);
    const outcome = {
      ...decision,
      messageId: message.messageId,
      topic: message.topic,
      deliveryAttempt: message.deliveryAttempt,
      deadLettered,
    } as ConsumeOutcome;
    this.observers.emit('consumed', {
      consumerGroup: this.options.consumerGroup,
      outcome,
      durationMs: elapsedMs(started),
      at: Date.now(),
    });
    this.report(outcome);
  }

  /** Acks, redelivers or dead-letters; returns whether the message went to the DLQ. */
  private async settle(message: InboundMessage, decision: Decision): Promise<boolean> {
    const ids = { messageId: message.messageId, attempt: message.deliveryAttempt };
    if (ACKED_KINDS.includes(decision.kind)) {
      await this.gateway.ack(message).catch((err: unknown) => {
        this.counters.settleFailures++;
        this.logger.warn(
          { ...errorFields(err), ...ids },
          'ack failed after commit; the redelivery is a duplicate',
        );
      });
      return false;
    }
    const error = 'error' in decision ? decision.error : undefined;
    const max = this.gateway.maxDeliveryAttempts;
    const lastAttempt = max !== undefined && message.deliveryAttempt >= max;
    if (decision.kind === 'MALFORMED' || lastAttempt) {
      try {
        await this.gateway.deadLetter(message);
        this.logger.error(
          {
            ...(error !== undefined ? errorFields(error) : {}),
            ...ids,
            kind: decision.kind,
            maxDeliveryAttempts: max,
          },
          'message moved to the dead-letter queue',
        );
        return true;
      } catch (err) {
        this.counters.settleFailures++;
        this.logger.warn({ ...errorFields(err), ...ids }, 'dead-lettering failed; the broker redelivers it');
      }
    }
    const delay =
      decision.kind === 'STORE_FAILED' && this.store.isConflict(decision.error)
        ? CONFLICT_RETRY_MS
        : this.backoff(message.deliveryAttempt);
    this.logger.warn(
      { ...(error !== undefined ? errorFields(error) : {}), ...ids, kind: decision.kind, retryInMs: delay },
      'message not applied; redelivering later',
    );
    await this.gateway.retryLater(message, delay).catch((err: unknown) => {
      this.counters.settleFailures++;
      this.logger.warn(
        { ...errorFields(err), ...ids },
        'redelivery request failed; the broker redelivers after the invisible duration',
      );
    });
    return false;
  }

  /** The retry policy's delay for a message delivered `attempt` times (1 on the first delivery). */
  private backoff(attempt: number): number {
    return retryDelay(attempt - 1, this.options.retry);
  }

  private count(decision: Decision, deadLettered: boolean): void {
    const c = this.counters;
    if (deadLettered) c.deadLettered++;
    switch (decision.kind) {
      case 'APPLIED':
        c.applied++;
        if (decision.gap) c.gapsAccepted++;
        break;
      case 'DUPLICATE':
        c.duplicates++;
        break;
      case 'STALE':
        c.stale++;
        break;
      case 'IGNORED':
        c.ignored++;
        break;
      case 'GAP_HELD':
        c.gapsHeld++;
        break;
      case 'MALFORMED':
        c.malformed++;
        break;
      case 'UNHANDLED':
        c.unhandled++;
        break;
      case 'HANDLER_FAILED':
        c.handlerFailures++;
        break;
      case 'STORE_FAILED':
        c.storeFailures++;
        break;
    }
  }

  private report(outcome: ConsumeOutcome): void {
    callHook(this.options.onOutcome, outcome, this.logger, 'onOutcome');
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
