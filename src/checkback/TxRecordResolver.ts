import type { TxRecordStore } from '../store/ports';
import { errorFields, noopLogger, type Logger } from '../util/logger';
import { isUuid } from '../util/uuidv7';
import { TransactionResolution, type CheckBackMessage, type CheckBackResolver } from './resolution';

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
  private readonly inFlight = new Map<string, Promise<TransactionResolution>>();

  constructor(
    private readonly store: TxRecordStore,
    private readonly options: TxRecordResolverOptions,
  ) {
    this.logger = options.logger ?? noopLogger;
  }

  resolve(message: CheckBackMessage): Promise<TransactionResolution> {
    const { txId, origin } = message;
    if (txId === undefined) return Promise.resolve(TransactionResolution.UNKNOWN);
    // Wrong-service guard: another service's half message; only its owner may decide it.
    if (origin !== this.options.producerGroup) return Promise.resolve(TransactionResolution.UNKNOWN);
    // A forged or malformed TX_ID is never ours: no tombstone, no answer.
    if (!isUuid(txId)) {
      this.logger.warn(
        { topic: message.topic, messageId: message.messageId },
        'check-back with a malformed TX_ID',
      );
      return Promise.resolve(TransactionResolution.UNKNOWN);
    }
    // One fence per txId at a time on this instance: a multi-event transaction is checked once per message.
    const pending = this.inFlight.get(txId);
    if (pending) return pending;
    const run = this.decide(txId, message.topic).finally(() => this.inFlight.delete(txId));
    this.inFlight.set(txId, run);
    return run;
  }

  private async decide(txId: string, topic: string): Promise<TransactionResolution> {
    const outcome = await this.store.fence(
      { txId, producerGroup: this.options.producerGroup, topic, eventCount: 0 },
      this.options.lockWaitTimeoutMs,
    );
    switch (outcome.kind) {
      case 'FENCED':
        this.logger.info({ txId, topic }, 'check-back fenced a transaction with no tx_record: ROLLBACK');
        return TransactionResolution.ROLLBACK;
      case 'COMMITTED':
        return TransactionResolution.COMMIT;
      case 'ROLLED_BACK':
        return TransactionResolution.ROLLBACK;
      case 'UNDECIDED':
        this.logger.warn(
          { txId, topic, reason: outcome.reason, ...errorFields(outcome.error) },
          'check-back undecided; the broker will ask again',
        );
        return TransactionResolution.UNKNOWN;
    }
  }
}
