/**
 * The broker side of a handled message: ack, redeliver with backoff, or dead-letter, and the
 * consumer's counters of what became of each delivery.
 */
import type { ConsumerGateway, InboundMessage } from '../broker/consumerGateway';
import type { InboxStore } from '../store/ports';
import { errorFields, type Logger } from '../util/logger';
import { retryDelay, type RetryPolicy } from '../util/retryPolicy';
import type { Decision } from './MessageProcessor';
import { ACKED_KINDS } from './outcome';

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

export function newConsumerStats(): ConsumerStats {
  return {
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
}

const COUNTER: Record<Decision['kind'], keyof ConsumerStats> = {
  APPLIED: 'applied',
  DUPLICATE: 'duplicates',
  STALE: 'stale',
  IGNORED: 'ignored',
  GAP_HELD: 'gapsHeld',
  MALFORMED: 'malformed',
  UNHANDLED: 'unhandled',
  HANDLER_FAILED: 'handlerFailures',
  STORE_FAILED: 'storeFailures',
};

/** Counts one settled delivery. */
export function countDecision(c: ConsumerStats, decision: Decision, deadLettered: boolean): void {
  if (deadLettered) c.deadLettered++;
  c[COUNTER[decision.kind]]++;
  if (decision.kind === 'APPLIED' && decision.gap) c.gapsAccepted++;
}

/** A write conflict (deadlock, serialization failure) is retried after this, not the backoff. */
const CONFLICT_RETRY_MS = 1000;

export class Settler {
  constructor(
    private readonly gateway: ConsumerGateway,
    private readonly store: InboxStore,
    private readonly retry: RetryPolicy,
    private readonly logger: Logger,
    private readonly counters: ConsumerStats,
  ) {}

  /** Acks, redelivers or dead-letters; returns whether the message went to the DLQ. */
  async settle(message: InboundMessage, decision: Decision): Promise<boolean> {
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
        : // The retry policy's delay for a message delivered `attempt` times (1 on the first delivery).
          retryDelay(message.deliveryAttempt - 1, this.retry);
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
}
