import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { NewTxRecord, TombstoneOutcome, TxRecordStore, TxStatus, TxStatusReader } from '../ports';
import { destroyConnection, dialectFor, type Dialect } from './dialect';

const COLUMNS = '(tx_id, status, resolved_by, producer_group, topic, event_count)';

/**
 * tx_record's primitives through the user's TypeORM DataSource, in raw SQL, per dialect. The
 * decisions over them (what a tombstone or a duplicate means) are in src/checkback/fence.ts.
 *
 * MySQL/MariaDB: the producer's INSERT catches ER_DUP_ENTRY (a failed statement leaves an InnoDB
 * transaction usable); the tombstone is an autocommit INSERT under the session's
 * innodb_lock_wait_timeout, saved and restored (dialect.withLockWait).
 *
 * PostgreSQL: a failed statement aborts the whole transaction, so a duplicate is never an error
 * here: `INSERT ... ON CONFLICT (tx_id) DO NOTHING RETURNING tx_id`, no row back = it exists. The
 * tombstone runs in its own transaction, `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL
 * lock_timeout` (one round trip), INSERT, COMMIT: READ COMMITTED because under REPEATABLE READ or
 * SERIALIZABLE (a server's default_transaction_isolation) ON CONFLICT fails with 40001 when the
 * conflicting row commits after the snapshot; SET LOCAL because it ends with the transaction,
 * whatever happens to it, so no connection goes back to the pool with a changed lock_timeout and
 * no round trip restores it.
 */
export class TypeOrmTxRecordStore implements TxRecordStore, TxStatusReader {
  private readonly dialect: Dialect;
  private readonly insertSql: string;
  private readonly selectSql: string;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectFor(dataSource);
    const p = (i: number) => this.dialect.placeholder(i);
    const insert = `INSERT INTO tx_record ${COLUMNS} VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)})`;
    this.insertSql =
      this.dialect.name === 'postgres' ? `${insert} ON CONFLICT (tx_id) DO NOTHING RETURNING tx_id` : insert;
    this.selectSql = `SELECT status FROM tx_record WHERE tx_id = ${p(1)}`;
  }

  async insertCommitted(manager: EntityManager, record: NewTxRecord): Promise<boolean> {
    return this.insert(manager, this.params(record, 'COMMITTED', 'PRODUCER'));
  }

  async insertTombstone(record: NewTxRecord, lockWaitTimeoutMs: number): Promise<TombstoneOutcome> {
    const params = this.params(record, 'ROLLED_BACK', 'CHECK_BACK');
    const queryRunner = this.dataSource.createQueryRunner();
    try {
      await queryRunner.connect();
      const inserted =
        this.dialect.name === 'postgres'
          ? await this.insertInOwnTransaction(queryRunner, lockWaitTimeoutMs, params)
          : // Autocommit INSERT: it waits on the producer's uncommitted row, so InnoDB decides once.
            await this.dialect.withLockWait(queryRunner, lockWaitTimeoutMs, () =>
              this.insert(queryRunner.manager, params),
            );
      return inserted ? { kind: 'INSERTED' } : { kind: 'EXISTS' };
    } catch (err) {
      const kind = this.dialect.classify(err);
      if (kind === 'LOCK_WAIT_TIMEOUT') return { kind: 'UNDECIDED', reason: 'LOCK_WAIT_TIMEOUT', error: err };
      if (kind === 'DEADLOCK') return { kind: 'UNDECIDED', reason: 'DEADLOCK', error: err };
      return { kind: 'UNDECIDED', reason: 'DATABASE_ERROR', error: err };
    } finally {
      await queryRunner.release().catch(() => undefined);
    }
  }

  async markConfirmed(txIds: readonly string[]): Promise<void> {
    if (txIds.length === 0) return;
    const list = txIds.map((_, i) => this.dialect.placeholder(i + 1)).join(', ');
    await this.dataSource.query(
      `UPDATE tx_record SET confirmed_at = ${this.dialect.nowExpression} WHERE confirmed_at IS NULL AND tx_id IN (${list})`,
      [...txIds],
    );
  }

  async readStatus(txId: string): Promise<TxStatus | undefined> {
    const rows: Array<{ status: TxStatus }> = await this.dataSource.query(this.selectSql, [txId]);
    return rows[0]?.status;
  }

  /** true: inserted; false: the txId exists (committed, or committed while this INSERT waited). */
  private async insert(manager: EntityManager, params: unknown[]): Promise<boolean> {
    if (this.dialect.name === 'postgres') {
      const rows: unknown[] = await manager.query(this.insertSql, params);
      return rows.length === 1;
    }
    try {
      await manager.query(this.insertSql, params);
      return true;
    } catch (err) {
      if (this.dialect.classify(err) === 'DUPLICATE_KEY') return false;
      throw err;
    }
  }

  /** PostgreSQL: the tombstone in a READ COMMITTED transaction of its own, lock_timeout LOCAL to it. */
  private async insertInOwnTransaction(
    queryRunner: QueryRunner,
    lockWaitTimeoutMs: number,
    params: unknown[],
  ): Promise<boolean> {
    // lock_timeout is milliseconds (0 disables it: at least 1). An integer, so inlined: a simple
    // query (no parameters) may hold both statements.
    const timeout = Math.max(1, Math.ceil(lockWaitTimeoutMs));
    let open = false;
    try {
      open = true;
      await queryRunner.query(
        `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '${timeout}ms'`,
      );
      const inserted = await this.insert(queryRunner.manager, params);
      await queryRunner.query('COMMIT');
      open = false;
      return inserted;
    } catch (err) {
      // A failed statement left the transaction aborted (or COMMIT's fate is unknown): end it, or
      // close the connection, so no pooled connection keeps it (and its row lock) open.
      if (open) await queryRunner.query('ROLLBACK').catch(() => destroyConnection(queryRunner));
      throw err;
    }
  }

  private params(record: NewTxRecord, status: TxStatus, resolvedBy: 'PRODUCER' | 'CHECK_BACK'): unknown[] {
    return [record.txId, status, resolvedBy, record.producerGroup, record.topic, record.eventCount];
  }
}
