import type { TxRecordStore } from '../store/ports';
import { toStoreError } from '../store/typeorm/storeError';
import type { CheckBackDecision, DecidedResolution } from './CheckBackDispatcher';
import { errorFields, noopLogger, type Logger } from '../util/logger';
import { isUuid } from '../util/uuidv7';
import {
  EVENT_ID_PROPERTY,
  TransactionResolution,
  type CheckBackMessage,
  type CheckBackResolver,
} from './resolution';

export interface TxRecordResolverOptions {
  producerGroup: string;
  lockWaitTimeoutMs: number;
  logger?: Logger;
}

/**
 * The built-in resolver: decides by *writing* the outcome (DESIGN.md "a fence, never a guess").
 * Insert a ROLLED_BACK tombstone; on duplicate key answer the row's status; on lock-wait
 * timeout, deadlock or any database error answer UNKNOWN, never ROLLBACK.
 */
export class TxRecordResolver implements CheckBackResolver {
  private readonly logger: Logger;
  private readonly inFlight = new Map<string, Promise<DecidedResolution>>();

  constructor(
    private readonly store: TxRecordStore,
    private readonly options: TxRecordResolverOptions,
  ) {
    this.logger = options.logger ?? noopLogger;
  }

  resolve(message: CheckBackMessage): Promise<TransactionResolution> {
    return this.resolveDecision(message).then((d) => d.resolution);
  }

  /** @internal Like resolve(), and says how the answer was decided (CheckBackOutcome.decidedBy, metrics). */
  resolveDecision(message: CheckBackMessage): Promise<DecidedResolution> {
    const { txId, origin } = message;
    if (txId === undefined) return unknown('no_tx_id');
    // Wrong-service guard: another service's half message; only its owner may decide it.
    if (origin !== this.options.producerGroup) return unknown('foreign_origin');
    // A forged or malformed TX_ID is never ours: no tombstone, no answer.
    if (!isUuid(txId)) {
      this.logger.warn(
        { topic: message.topic, messageId: message.messageId },
        'check-back with a malformed TX_ID',
      );
      return unknown('malformed');
    }
    // Our half messages carry a UUID EVENT_ID: a malformed one was not sent by rocketmq-tx.
    const eventId = message.properties[EVENT_ID_PROPERTY];
    if (eventId !== undefined && !isUuid(eventId)) {
      this.logger.warn(
        { topic: message.topic, messageId: message.messageId, txId },
        'check-back with a malformed EVENT_ID',
      );
      return unknown('malformed');
    }
    // One fence per txId at a time on this instance: a multi-event transaction is checked once per message.
    const pending = this.inFlight.get(txId);
    if (pending) return pending;
    const run = this.decide(txId, message.topic).finally(() => this.inFlight.delete(txId));
    this.inFlight.set(txId, run);
    return run;
  }

  private async decide(txId: string, topic: string): Promise<DecidedResolution> {
    const outcome = await this.store.fence(
      { txId, producerGroup: this.options.producerGroup, topic, eventCount: 0 },
      this.options.lockWaitTimeoutMs,
    );
    switch (outcome.kind) {
      case 'FENCED':
        this.logger.info({ txId, topic }, 'check-back fenced a transaction with no tx_record: ROLLBACK');
        return { resolution: TransactionResolution.ROLLBACK, decidedBy: 'fenced' };
      case 'COMMITTED':
        return { resolution: TransactionResolution.COMMIT, decidedBy: 'row_found' };
      case 'ROLLED_BACK':
        return { resolution: TransactionResolution.ROLLBACK, decidedBy: 'row_found' };
      case 'UNDECIDED':
        this.logger.warn(
          {
            txId,
            topic,
            reason: outcome.reason,
            ...errorFields(toStoreError('check-back fence', outcome.error)),
          },
          'check-back undecided; the broker will ask again',
        );
        return {
          resolution: TransactionResolution.UNKNOWN,
          decidedBy: UNDECIDED_REASONS[outcome.reason],
        };
    }
  }
}

const UNDECIDED_REASONS: Record<'LOCK_WAIT_TIMEOUT' | 'DEADLOCK' | 'DATABASE_ERROR', CheckBackDecision> = {
  LOCK_WAIT_TIMEOUT: 'lock_timeout',
  DEADLOCK: 'deadlock',
  DATABASE_ERROR: 'error',
};

function unknown(decidedBy: CheckBackDecision): Promise<DecidedResolution> {
  return Promise.resolve({ resolution: TransactionResolution.UNKNOWN, decidedBy });
}
