import { notInitialized } from '../util/clientOptions';
import { InFlight, Lifecycle, callHook } from '../lifecycle/Lifecycle';
import type { ConsumerGateway, ConsumerGatewayConfig, InboundMessage } from '../broker/consumerGateway';
import { RocketMqConsumerGateway } from '../broker/RocketMqConsumerGateway';
import { connectionFields } from '../broker/gateway';
import { errorFields, type Logger } from '../util/logger';
import { withTimeout } from '../util/time';
import type { InboxStore } from '../store/ports';
import { MessageProcessor, type Decision } from './MessageProcessor';
import {
  resolveConsumerOptions,
  type IdempotentConsumerOptions,
  type ResolvedConsumerOptions,
} from './options';
import type { ConsumeOutcome } from './outcome';
import { Settler, countDecision, newConsumerStats, type ConsumerStats } from './settle';
import { ReceiveSlots } from './ReceiveSlots';
import { storesFor } from '../store';
import { ATTACH_OBSERVER, Observers, elapsedMs, type TxObserver } from '../observability/observer';

export type { ConsumerStats } from './settle';

/** @internal Seams for unit tests: a fake broker and store. */
export interface ConsumerInternals {
  gateway?: (config: ConsumerGatewayConfig, logger: Logger) => ConsumerGateway;
  store?: InboxStore;
}

const RECEIVE_FAILURE_BACKOFF_MS = 1000;
/** How long past longPollingMs shutdown waits for an open receive to return. */
const POLL_RETURN_MARGIN_MS = 1000;
const MAX_BATCH = 32;
/** Slots per receive loop below which a subscription keeps a single loop. */
const SLOTS_PER_LOOP = 8;
const MAX_LOOPS_PER_SUBSCRIPTION = 4;

/**
 * How a subscription receives: `loops` receives in flight, each asking for up to `batch`
 * messages once at least `minBatch` slots are free. Several loops keep a receive open while the
 * others' messages are handled; the low-water mark makes a busy consumer fetch batches (one pop
 * on the broker for many messages) instead of one message per freed slot.
 * @internal
 */
export function receivePlan(
  concurrency: number,
  subscriptions: number,
): { loops: number; batch: number; minBatch: number } {
  const budget = Math.max(1, Math.floor(concurrency / subscriptions));
  const loops = Math.max(1, Math.min(MAX_LOOPS_PER_SUBSCRIPTION, Math.floor(budget / SLOTS_PER_LOOP)));
  const batch = Math.max(1, Math.min(MAX_BATCH, Math.floor(budget / loops)));
  return { loops, batch, minBatch: Math.ceil(batch / 2) };
}

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
  private readonly receiving = new InFlight();
  private readonly observers = new Observers();
  private readonly counters: ConsumerStats = newConsumerStats();
  private readonly settler: Settler;

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
    this.settler = new Settler(this.gateway, this.store, o.retry, o.logger, this.counters);
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
          // Receive loops per subscription, so a quiet topic's long poll does not delay another.
          const plan = receivePlan(o.concurrency, o.subscriptions.size);
          for (let i = 0; i < o.subscriptions.size * plan.loops; i++) void this.receiveLoop(plan);
          this.logger.info(
            { consumerGroup: o.consumerGroup, topics: [...o.subscriptions.keys()] },
            'idempotent consumer started',
          );
        },
        onStopping: () => this.slots.close(),
        drain: async (deadline) => {
          // Open long polls are let return (they end within longPollingMs): a cancelled one is
          // still served by the proxy, which pops what arrives and nacks it into the broker's
          // revive path (on 5.3.3: held back past a minute, or delivered twice). One that has not
          // returned a second after that (a broker gone) is not waited for.
          const cap = this.options.longPollingMs + POLL_RETURN_MARGIN_MS;
          await deadline.within(
            withTimeout(
              this.receiving.idle(),
              cap,
              () => new Error(`${this.receiving.size} receives still open after ${cap} ms`),
            ),
            'open receives did not return in time; what they take is redelivered after invisibleDurationMs',
            () => ({ receiving: this.receiving.size }),
          );
          return deadline.within(
            this.handling.idle(),
            'shutdown did not drain in time; unsettled messages will be redelivered',
            () => ({ pending: this.handling.size }),
          );
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
   * Stops receiving, lets the long polls already open return (at most longPollingMs) and handles
   * what they bring, lets in-flight handlers finish and settle, then closes the client; all of it
   * within one shutdownTimeoutMs budget. Every call gets the same promise. Never rejects.
   * Messages still unsettled when the budget ends are redelivered after invisibleDurationMs.
   */
  shutdown(): Promise<void> {
    return this.lifecycle.shutdown();
  }

  private async receiveLoop(plan: { batch: number; minBatch: number }): Promise<void> {
    while (this.lifecycle.isRunning) {
      // At most a fair share per receive, so every loop can long-poll at once when it fits.
      const reserved = await this.slots.reserve(plan.batch, plan.minBatch);
      if (!this.lifecycle.isRunning) {
        this.slots.release(reserved);
        return;
      }
      // Tracked until its messages are dispatched, so shutdown waits for it (see drain).
      const received = await this.receiving.track(this.receiveOnce(reserved));
      if (!received && this.lifecycle.isRunning) await sleep(RECEIVE_FAILURE_BACKOFF_MS);
    }
  }

  /** One receive of at most `reserved` messages, each dispatched; false if the receive failed. */
  private async receiveOnce(reserved: number): Promise<boolean> {
    let messages: InboundMessage[];
    try {
      messages = await this.gateway.receive(reserved);
    } catch (err) {
      this.slots.release(reserved);
      if (this.lifecycle.isRunning) {
        this.counters.receiveFailures++;
        this.logger.warn(errorFields(err), 'receive failed; retrying');
      }
      return false;
    }
    // Each message keeps its slot until settled; the rest of the reservation is free again.
    this.slots.release(reserved - messages.length);
    for (const message of messages) this.dispatch(message);
    return true;
  }

  private dispatch(message: InboundMessage): void {
    this.counters.received++;
    // The slot is held until the message is settled: it also bounds the acks not yet answered,
    // so a slow proxy slows receiving instead of letting acks queue past invisibleDurationMs.
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
    const deadLettered = await this.settler.settle(message, decision);
    countDecision(this.counters, decision, deadLettered);
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

  private report(outcome: ConsumeOutcome): void {
    callHook(this.options.onOutcome, outcome, this.logger, 'onOutcome');
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
