import { Semaphore } from '../util/semaphore';
import { errorFields, type Logger } from '../util/logger';
import type { CheckBackDecision, DecidedResolution } from './fence';
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

export type { CheckBackDecision, DecidedResolution } from './fence';

/** One answered check-back, for metrics and audit logs. */
export interface CheckBackOutcome {
  readonly messageId: string;
  readonly topic: string;
  readonly txId?: string;
  readonly resolution: TransactionResolution;
  readonly decidedBy: CheckBackDecision;
  readonly durationMs: number;
}

/**
 * The built-in resolver (the fence, TxRecordResolver): decides with its ownership guards and says
 * how; `answered` sees every answer given (the "COMMIT answered -> confirm" step).
 */
export interface BuiltInResolver {
  /**
   * true: the resolver queues, bounds and sheds its own database work (the fence's batching
   * queue); the dispatcher's semaphore then bounds only a custom resolver's calls.
   */
  readonly bounded?: boolean;
  resolveDecision(message: CheckBackMessage): Promise<DecidedResolution>;
  answered?(message: CheckBackMessage, resolution: TransactionResolution): void;
}

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

  /**
   * The answer to `message` reached the proxy (the gateway calls this after EndTransaction
   * returned OK): only now does a COMMIT confirm the event.
   */
  answerSent(message: CheckBackMessage, resolution: TransactionResolution): void {
    try {
      this.options.builtIn.answered?.(message, resolution);
    } catch (err) {
      this.options.logger.warn(errorFields(err), 'check-back confirmation failed; ignored');
    }
  }

  private async decide(message: CheckBackMessage): Promise<DecidedResolution> {
    this.stats.received++;
    const custom = this.customRoute(message);
    const release =
      custom || !this.options.builtIn.bounded ? await this.semaphore.acquire() : () => undefined;
    if (!release) return this.shed();
    try {
      const { resolution: answer, decidedBy } = custom
        ? { resolution: await custom.resolve(message), decidedBy: 'custom_resolver' as const }
        : await this.builtIn(message);
      if (decidedBy === 'shed') return this.shed();
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

  private shed(): DecidedResolution {
    this.stats.shed++;
    return this.count(TransactionResolution.UNKNOWN, 'shed');
  }

  /** The custom resolver, where configured for this message; else the fence decides. */
  private customRoute(message: CheckBackMessage): CheckBackResolver | undefined {
    const { resolver, resolverScope } = this.options;
    return resolver && (resolverScope === 'all' || message.txId === undefined) ? resolver : undefined;
  }

  /** The fence, which applies the ownership guards. */
  private async builtIn(message: CheckBackMessage): Promise<DecidedResolution> {
    const decided = await this.options.builtIn.resolveDecision(message);
    if (decided.decidedBy === 'foreign_origin') this.stats.foreignOrigin++;
    return decided;
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
