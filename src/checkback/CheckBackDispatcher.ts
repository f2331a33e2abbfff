import { Semaphore } from '../util/semaphore';
import { errorFields, type Logger } from '../util/logger';
import { TransactionResolution, type CheckBackMessage, type CheckBackResolver } from './resolution';

export type ResolverScope = 'without-tx-id' | 'all';

export interface CheckBackStats {
  received: number;
  commit: number;
  rollback: number;
  unknown: number;
  foreignOrigin: number;
  shed: number;
  errors: number;
}

/**
 * How a check-back's answer was decided:
 * - `row_found`: the fence found the transaction's tx_record row (COMMIT or ROLLBACK as it says);
 * - `fenced`: the fence inserted the ROLLED_BACK tombstone (ROLLBACK; the producer was too late);
 * - `lock_timeout` / `deadlock`: the fence could not decide yet (UNKNOWN; the broker asks again);
 * - `error`: a database error, or a resolver that threw or returned no resolution (UNKNOWN);
 * - `shed`: the check-back queue was full (UNKNOWN);
 * - `foreign_origin`: another producerGroup's transaction (UNKNOWN, wrong-service guard);
 * - `malformed`: a TX_ID or EVENT_ID rocketmq-tx did not write (UNKNOWN, no write);
 * - `no_tx_id`: a message without TX_ID and no custom resolver (UNKNOWN);
 * - `custom_resolver`: the user's CheckBackResolver answered.
 */
export type CheckBackDecision =
  | 'row_found'
  | 'fenced'
  | 'lock_timeout'
  | 'deadlock'
  | 'error'
  | 'shed'
  | 'foreign_origin'
  | 'malformed'
  | 'no_tx_id'
  | 'custom_resolver';

/** A resolution and how it was decided. */
export interface DecidedResolution {
  readonly resolution: TransactionResolution;
  readonly decidedBy: CheckBackDecision;
}

/** One answered check-back, for metrics and audit logs. */
export interface CheckBackOutcome {
  readonly messageId: string;
  readonly topic: string;
  readonly txId?: string;
  readonly resolution: TransactionResolution;
  readonly decidedBy: CheckBackDecision;
  readonly durationMs: number;
}

/** The built-in resolver; `resolveDecision` (TxRecordResolver has it) also says how it decided. */
export type BuiltInResolver = CheckBackResolver & {
  resolveDecision?(message: CheckBackMessage): Promise<DecidedResolution>;
};

export interface CheckBackDispatcherOptions {
  producerGroup: string;
  builtIn: BuiltInResolver;
  resolver?: CheckBackResolver;
  resolverScope: ResolverScope;
  concurrency: number;
  maxQueued: number;
  logger: Logger;
  onResolved?: (outcome: CheckBackOutcome) => void;
}

/**
 * Routes each check-back to the right resolver under a concurrency limit. Past the queue bound
 * it answers UNKNOWN at once (the broker asks again) so a storm cannot starve business traffic.
 */
export class CheckBackDispatcher {
  readonly stats: CheckBackStats = {
    received: 0,
    commit: 0,
    rollback: 0,
    unknown: 0,
    foreignOrigin: 0,
    shed: 0,
    errors: 0,
  };
  private readonly semaphore: Semaphore;
  private readonly warnedOrigins = new Set<string>();

  constructor(private readonly options: CheckBackDispatcherOptions) {
    this.semaphore = new Semaphore(options.concurrency, options.maxQueued);
  }

  async handle(message: CheckBackMessage): Promise<TransactionResolution> {
    const started = Date.now();
    const { resolution: answer, decidedBy } = await this.decide(message);
    const listener = this.options.onResolved;
    if (listener) {
      try {
        listener({
          messageId: message.messageId,
          topic: message.topic,
          ...(message.txId !== undefined ? { txId: message.txId } : {}),
          resolution: answer,
          decidedBy,
          durationMs: Date.now() - started,
        });
      } catch (err) {
        this.options.logger.warn(errorFields(err), 'checkBack.onResolved threw; ignored');
      }
    }
    return answer;
  }

  private async decide(message: CheckBackMessage): Promise<DecidedResolution> {
    this.stats.received++;
    const release = await this.semaphore.acquire();
    if (!release) {
      this.stats.shed++;
      return this.count(TransactionResolution.UNKNOWN, 'shed');
    }
    try {
      const { resolution: answer, decidedBy } = await this.route(message);
      if (!isResolution(answer)) {
        this.stats.errors++;
        this.options.logger.error(
          { answer: String(answer), messageId: message.messageId },
          'check-back resolver returned no TransactionResolution; answering UNKNOWN',
        );
        return this.count(TransactionResolution.UNKNOWN, 'error');
      }
      return this.count(answer, decidedBy);
    } catch (err) {
      this.stats.errors++;
      this.options.logger.error(
        { ...errorFields(err), messageId: message.messageId, txId: message.txId },
        'check-back resolver threw; answering UNKNOWN',
      );
      return this.count(TransactionResolution.UNKNOWN, 'error');
    } finally {
      release();
    }
  }

  private async route(message: CheckBackMessage): Promise<DecidedResolution> {
    const { resolver, resolverScope, builtIn, producerGroup } = this.options;
    if (resolver && (resolverScope === 'all' || message.txId === undefined)) {
      return { resolution: await resolver.resolve(message), decidedBy: 'custom_resolver' };
    }
    if (message.txId === undefined)
      return { resolution: TransactionResolution.UNKNOWN, decidedBy: 'no_tx_id' };
    if (message.origin !== producerGroup) {
      this.stats.foreignOrigin++;
      const origin = message.origin ?? '(none)';
      if (!this.warnedOrigins.has(origin)) {
        this.warnedOrigins.add(origin);
        this.options.logger.warn(
          { origin, producerGroup, topic: message.topic },
          'check-back for a transaction of another producerGroup: not ours to decide, answering UNKNOWN',
        );
      }
      return { resolution: TransactionResolution.UNKNOWN, decidedBy: 'foreign_origin' };
    }
    if (builtIn.resolveDecision) return builtIn.resolveDecision(message);
    // A built-in that reports no detail (test doubles): an answer is taken as read from the row.
    const resolution = await builtIn.resolve(message);
    return { resolution, decidedBy: resolution === TransactionResolution.UNKNOWN ? 'error' : 'row_found' };
  }

  private count(resolution: TransactionResolution, decidedBy: CheckBackDecision): DecidedResolution {
    if (resolution === TransactionResolution.COMMIT) this.stats.commit++;
    else if (resolution === TransactionResolution.ROLLBACK) this.stats.rollback++;
    else this.stats.unknown++;
    return { resolution, decidedBy };
  }
}

function isResolution(value: unknown): value is TransactionResolution {
  return value === 'COMMIT' || value === 'ROLLBACK' || value === 'UNKNOWN';
}
