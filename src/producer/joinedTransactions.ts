import type {
  DataSource,
  EntitySubscriberInterface,
  QueryRunner,
  TransactionCommitEvent,
  TransactionRollbackEvent,
} from 'typeorm';
import type { HalfMessage } from '../broker/gateway';
import type { DeliveryMode } from './options';

/** How a joined transaction ended, as far as this process knows. */
export type PublishOutcome =
  /** The caller's transaction committed (the fence row is readable) and the broker was told COMMIT. */
  | 'committed'
  /** It rolled back (or the fence row is absent after its commit): the half messages were rolled back. */
  | 'rolled_back'
  /** Not known here (an ambiguous COMMIT, a failed read or EndTransaction): the check-back decides from tx_record. */
  | 'unknown';

/** One publish() call's half messages. */
export interface JoinedCall {
  halves: HalfMessage[];
  eventIds: string[];
}

/** One fence row of a caller transaction (one per savepoint level that published), keyed by its QueryRunner. */
export interface JoinedTransaction {
  readonly txId: string;
  readonly started: number;
  /** Settles once tx_record is inserted; a later publish in the same transaction awaits it. */
  recorded: Promise<void>;
  /** The savepoint depth the fence row was inserted at (lowered when that savepoint is released). */
  fenceDepth: number;
  calls: JoinedCall[];
  delivery: DeliveryMode;
  /** The outermost COMMIT was attempted: a later rollback event may hide a commit (ambiguous). */
  commitAttempted: boolean;
  readonly outcome: Promise<PublishOutcome>;
  settle(outcome: PublishOutcome): void;
}

/** What the producer does when a joined transaction (or part of it) is over. */
export interface JoinedTransactionHandlers {
  /** The outermost COMMIT returned. Must not throw; nothing awaits it. */
  committed(joined: JoinedTransaction): void;
  /** The outermost transaction rolled back (ambiguous: a COMMIT was attempted first). Must not throw. */
  rolledBack(joined: JoinedTransaction, ambiguous: boolean): void;
  /** A savepoint rollback undid this fence row and every call on it. Must not throw. */
  undone(joined: JoinedTransaction): void;
  /** A handler failed unexpectedly (logged; never rethrown into TypeORM). */
  failed(err: unknown): void;
}

/**
 * TypeORM's savepoint depth of a QueryRunner (0: no transaction, 1: the outermost, n: n-1
 * savepoints). The field is protected in TypeORM 0.3's typings but set by every driver.
 */
export function transactionDepth(queryRunner: QueryRunner): number {
  const depth = (queryRunner as unknown as { transactionDepth?: unknown }).transactionDepth;
  return typeof depth === 'number' ? depth : queryRunner.isTransactionActive ? 1 : 0;
}

/** The DataSource's subscriber list (absent on a DataSource stand-in that has none). */
function subscribersOf(dataSource: DataSource): EntitySubscriberInterface[] | undefined {
  const subscribers = (dataSource as { subscribers?: unknown }).subscribers;
  return Array.isArray(subscribers) ? (subscribers as EntitySubscriberInterface[]) : undefined;
}

/**
 * A TypeORM subscriber that tells the producer when a joined transaction is really over.
 * TypeORM sends transaction events to every subscriber for every QueryRunner, also on savepoint
 * release and rollback, and awaits them after COMMIT (a throwing handler makes
 * commitTransaction reject although the data committed). So: state is keyed by QueryRunner
 * (others are ignored), the outermost end is told apart by `!queryRunner.isTransactionActive`,
 * handlers never throw and never return a promise (the broker round trips run after the
 * caller's commit returned, holding none of its connection).
 */
export class JoinedTransactions implements EntitySubscriberInterface {
  /**
   * The fences of each caller transaction, oldest first. A publish() in a savepoint deeper than
   * every fence gets its own fence row (its own txId), inserted inside that savepoint: a ROLLBACK
   * TO SAVEPOINT then removes the row with the calls, so a check-back of those half messages
   * tombstones and answers ROLLBACK even when the immediate rollback never reaches the broker.
   * (One fence per caller transaction would answer COMMIT for them once the outer transaction
   * commits: the undone events would be delivered.)
   */
  private readonly byRunner = new WeakMap<QueryRunner, JoinedTransaction[]>();

  constructor(private readonly handlers: JoinedTransactionHandlers) {}

  /** Registers this subscriber on the DataSource (again after a re-initialize replaced its list). */
  attach(dataSource: DataSource): void {
    const subscribers = subscribersOf(dataSource);
    if (subscribers && !subscribers.includes(this)) subscribers.push(this);
  }

  detach(dataSource: DataSource): void {
    const subscribers = subscribersOf(dataSource);
    const at = subscribers ? subscribers.indexOf(this) : -1;
    if (at >= 0) subscribers!.splice(at, 1);
  }

  /** The fence a publish() at the QueryRunner's current savepoint depth joins, if any. */
  get(queryRunner: QueryRunner): JoinedTransaction | undefined {
    const depth = transactionDepth(queryRunner);
    const fences = this.byRunner.get(queryRunner) ?? [];
    for (let i = fences.length - 1; i >= 0; i--) if (fences[i]!.fenceDepth === depth) return fences[i];
    return undefined;
  }

  /** Starts a fence of a caller transaction at its current depth (the caller then inserts the row). */
  join(queryRunner: QueryRunner, txId: string, delivery: DeliveryMode, started: number): JoinedTransaction {
    let settle!: (outcome: PublishOutcome) => void;
    const outcome = new Promise<PublishOutcome>((resolve) => (settle = resolve));
    const joined: JoinedTransaction = {
      txId,
      started,
      recorded: Promise.resolve(),
      fenceDepth: transactionDepth(queryRunner),
      calls: [],
      delivery,
      commitAttempted: false,
      outcome,
      settle,
    };
    const fences = this.byRunner.get(queryRunner);
    if (fences) fences.push(joined);
    else this.byRunner.set(queryRunner, [joined]);
    return joined;
  }

  /** Forgets a fence whose row could not be inserted. */
  forget(queryRunner: QueryRunner, joined: JoinedTransaction): void {
    const fences = this.byRunner.get(queryRunner);
    const at = fences ? fences.indexOf(joined) : -1;
    if (at >= 0) fences!.splice(at, 1);
  }

  beforeTransactionCommit(event: TransactionCommitEvent): void {
    const fences = this.byRunner.get(event.queryRunner);
    // Depth 1: this is the outermost COMMIT (a savepoint release has depth > 1).
    if (fences && transactionDepth(event.queryRunner) <= 1) for (const f of fences) f.commitAttempted = true;
  }

  afterTransactionCommit(event: TransactionCommitEvent): void {
    this.guard(() => {
      const queryRunner = event.queryRunner;
      const fences = this.byRunner.get(queryRunner);
      if (!fences) return;
      if (queryRunner.isTransactionActive) {
        // A savepoint was released: its fences now belong to the enclosing level.
        const depth = transactionDepth(queryRunner);
        for (const f of fences) f.fenceDepth = Math.min(f.fenceDepth, depth);
        return;
      }
      this.byRunner.delete(queryRunner);
      for (const f of fences) this.handlers.committed(f);
    });
  }

  afterTransactionRollback(event: TransactionRollbackEvent): void {
    this.guard(() => {
      const queryRunner = event.queryRunner;
      const fences = this.byRunner.get(queryRunner);
      if (!fences) return;
      if (queryRunner.isTransactionActive) {
        // ROLLBACK TO SAVEPOINT: the fences inserted inside it are gone, with their calls.
        const depth = transactionDepth(queryRunner);
        const undone = fences.filter((f) => f.fenceDepth > depth);
        if (undone.length === 0) return;
        this.byRunner.set(
          queryRunner,
          fences.filter((f) => f.fenceDepth <= depth),
        );
        for (const f of undone) this.handlers.undone(f);
        return;
      }
      this.byRunner.delete(queryRunner);
      for (const f of fences) this.handlers.rolledBack(f, f.commitAttempted);
    });
  }

  private guard(step: () => void): void {
    try {
      step();
    } catch (err) {
      this.handlers.failed(err);
    }
  }
}
