import type { CheckBackOutcome } from '../checkback/CheckBackDispatcher';
import type { ConsumeOutcome } from '../consumer/outcome';

/**
 * The internal hooks the components emit and RocketMqTxMetrics listens to. No component
 * depends on prom-client: without an attached observer every emit is a loop over nothing.
 */

/** How a transact() call ended. */
export type TransactionOutcomeLabel =
  /** The local transaction committed (its events are delivered, now or by check-back/relay). */
  | 'committed'
  /** `work` threw: the local transaction was rolled back and its half messages discarded. */
  | 'rolled_back'
  /** A check-back fenced the txId before the producer inserted its tx_record. */
  | 'fenced'
  /** COMMIT failed ambiguously (TransactionOutcomeUnknownError); the check-back decides. */
  | 'outcome_unknown'
  /** The SDK could not run the transaction (broker unavailable, store error, duplicate event). */
  | 'failed';

export interface TransactionEvent {
  producerGroup: string;
  outcome: TransactionOutcomeLabel;
  /** Effective delivery (an outbox fallback reports 'outbox'). */
  delivery: 'transactional' | 'outbox' | 'cdc';
  durationMs: number;
}

export interface RelayDeliveryEvent {
  topic: string;
  result: 'sent' | 'retry' | 'dead';
}

export interface ConsumeEvent {
  consumerGroup: string;
  outcome: ConsumeOutcome;
  /** Processing time of this delivery: dedupe, cursor, handler, commit and settle. */
  durationMs: number;
  /** Epoch ms (process clock) at which the delivery was settled. */
  at: number;
}

export interface TxEvents {
  transaction: TransactionEvent;
  checkBack: { producerGroup: string; outcome: CheckBackOutcome };
  endTransactionFailed: { producerGroup: string };
  outboxFallback: { producerGroup: string };
  relayDelivery: RelayDeliveryEvent;
  relayRepublished: { count: number };
  /** The producer's discard recovery republished an event, or failed to and rescheduled it. */
  discardRecovery: { producerGroup: string; result: 'republished' | 'retry' };
  consumed: ConsumeEvent;
}

/** Any subset of the hooks. */
export type TxObserver = { readonly [K in keyof TxEvents]?: (event: TxEvents[K]) => void };

/**
 * The method by which RocketMqTxMetrics attaches an observer to a component (not public API).
 * @internal
 */
export const ATTACH_OBSERVER: unique symbol = Symbol('rocketmq-tx.attachObserver');

/**
 * A component RocketMqTxMetrics can observe: a TransactionalProducer, OutboxRelay or
 * IdempotentConsumer. Each registers itself by implementing the internal attach method, so
 * observability depends on this interface, not on the component classes.
 */
export interface ObservableComponent {
  /** Starts the component (observers may be attached before or after). */
  start(): Promise<void>;
  /** Stops the component; attached observers stay attached. */
  shutdown(): Promise<void>;
  /** @internal */
  [ATTACH_OBSERVER](observer: TxObserver): () => void;
}

/** Whether `value` is a component that accepts observers (any other object is refused). */
export function isObservable(value: unknown): value is ObservableComponent {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Partial<ObservableComponent>)[ATTACH_OBSERVER] === 'function'
  );
}

/** A component's observers. An observer that throws is ignored: metrics never break delivery. */
export class Observers {
  private list: readonly TxObserver[] = [];

  /** Adds an observer; returns the function that removes it. */
  add(observer: TxObserver): () => void {
    this.list = [...this.list, observer];
    return () => {
      this.list = this.list.filter((o) => o !== observer);
    };
  }

  emit<K extends keyof TxEvents>(name: K, event: TxEvents[K]): void {
    for (const observer of this.list) {
      const hook = observer[name] as ((e: TxEvents[K]) => void) | undefined;
      if (!hook) continue;
      try {
        hook.call(observer, event);
      } catch {
        // An observer's failure must not change what the SDK does.
      }
    }
  }
}

/** Milliseconds since `started` (a performance.now() value). */
export function elapsedMs(started: number): number {
  return performance.now() - started;
}
