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

/** One answered check-back, for metrics and audit logs. */
export interface CheckBackOutcome {
  readonly messageId: string;
  readonly topic: string;
  readonly txId?: string;
  readonly resolution: TransactionResolution;
  readonly durationMs: number;
}

export interface CheckBackDispatcherOptions {
  producerGroup: string;
  builtIn: CheckBackResolver;
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
    const answer = await this.decide(message);
    const listener = this.options.onResolved;
    if (listener) {
      try {
        listener({
          messageId: message.messageId,
          topic: message.topic,
          ...(message.txId !== undefined ? { txId: message.txId } : {}),
          resolution: answer,
          durationMs: Date.now() - started,
        });
      } catch (err) {
        this.options.logger.warn(errorFields(err), 'checkBack.onResolved threw; ignored');
      }
    }
    return answer;
  }

  private async decide(message: CheckBackMessage): Promise<TransactionResolution> {
    this.stats.received++;
    const release = await this.semaphore.acquire();
    if (!release) {
      this.stats.shed++;
      return this.count(TransactionResolution.UNKNOWN);
    }
    try {
      const answer = await this.route(message);
      if (!isResolution(answer)) {
        this.stats.errors++;
        this.options.logger.error(
          { answer: String(answer), messageId: message.messageId },
          'check-back resolver returned no TransactionResolution; answering UNKNOWN',
        );
        return this.count(TransactionResolution.UNKNOWN);
      }
      return this.count(answer);
    } catch (err) {
      this.stats.errors++;
      this.options.logger.error(
        { ...errorFields(err), messageId: message.messageId, txId: message.txId },
        'check-back resolver threw; answering UNKNOWN',
      );
      return this.count(TransactionResolution.UNKNOWN);
    } finally {
      release();
    }
  }

  private route(message: CheckBackMessage): Promise<TransactionResolution> {
    const { resolver, resolverScope, builtIn, producerGroup } = this.options;
    if (resolver && (resolverScope === 'all' || message.txId === undefined)) return resolver.resolve(message);
    if (message.txId === undefined) return Promise.resolve(TransactionResolution.UNKNOWN);
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
      return Promise.resolve(TransactionResolution.UNKNOWN);
    }
    return builtIn.resolve(message);
  }

  private count(resolution: TransactionResolution): TransactionResolution {
    if (resolution === TransactionResolution.COMMIT) this.stats.commit++;
    else if (resolution === TransactionResolution.ROLLBACK) this.stats.rollback++;
    else this.stats.unknown++;
    return resolution;
  }
}

function isResolution(value: unknown): value is TransactionResolution {
  return value === 'COMMIT' || value === 'ROLLBACK' || value === 'UNKNOWN';
}
