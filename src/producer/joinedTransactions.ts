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

/** One publish() call's half messages, at the savepoint depth it ran in. */
export interface JoinedCall {
  depth: number;
  halves: HalfMessage[];
  eventIds: string[];
}

/** The producer's state for one caller transaction, keyed by its QueryRunner. */
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
  /** A savepoint rollback undid these calls (all of them when `fenceUndone`). Must not throw. */
  undone(joined: JoinedTransaction, calls: JoinedCall[], fenceUndone: boolean): void;
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
  private readonly byRunner = new WeakMap<QueryRunner, JoinedTransaction>();

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

  get(queryRunner: QueryRunner): JoinedTransaction | undefined {
    return this.byRunner.get(queryRunner);
  }

  /** Starts the state of a caller transaction (the caller then inserts its fence row). */
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
    this.byRunner.set(queryRunner, joined);
    return joined;
  }

  /** Forgets a transaction whose fence row could not be inserted. */
  forget(queryRunner: QueryRunner, joined: JoinedTransaction): void {
    if (this.byRunner.get(queryRunner) === joined) this.byRunner.delete(queryRunner);
  }

  beforeTransactionCommit(event: TransactionCommitEvent): void {
    const joined = this.byRunner.get(event.queryRunner);
    // Depth 1: this is the outermost COMMIT (a savepoint release has depth > 1).
    if (joined && transactionDepth(event.queryRunner) <= 1) joined.commitAttempted = true;
  }

  afterTransactionCommit(event: TransactionCommitEvent): void {
    this.guard(() => {
      const queryRunner = event.queryRunner;
      const joined = this.byRunner.get(queryRunner);
      if (!joined) return;
      if (queryRunner.isTransactionActive) {
        // A savepoint was released: its work now belongs to the enclosing level.
        const depth = transactionDepth(queryRunner);
        joined.fenceDepth = Math.min(joined.fenceDepth, depth);
        for (const call of joined.calls) call.depth = Math.min(call.depth, depth);
        return;
      }
      this.byRunner.delete(queryRunner);
      this.handlers.committed(joined);
    });
  }

  afterTransactionRollback(event: TransactionRollbackEvent): void {
    this.guard(() => {
      const queryRunner = event.queryRunner;
      const joined = this.byRunner.get(queryRunner);
      if (!joined) return;
      if (queryRunner.isTransactionActive) {
        // ROLLBACK TO SAVEPOINT: the calls made inside it are undone, the fence row too if it was.
        const depth = transactionDepth(queryRunner);
        const fenceUndone = joined.fenceDepth > depth;
        const undone = fenceUndone ? joined.calls : joined.calls.filter((c) => c.depth > depth);
        if (undone.length === 0 && !fenceUndone) return;
        joined.calls = fenceUndone ? [] : joined.calls.filter((c) => c.depth <= depth);
        if (fenceUndone) this.byRunner.delete(queryRunner);
        this.handlers.undone(joined, undone, fenceUndone);
        return;
      }
      this.byRunner.delete(queryRunner);
      this.handlers.rolledBack(joined, joined.commitAttempted);
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
