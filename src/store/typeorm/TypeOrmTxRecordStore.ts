import type { DataSource, EntityManager } from 'typeorm';
import type {
  NewTxRecord,
  TombstoneOutcome,
  TombstonesOutcome,
  TxRecordState,
  TxRecordStore,
  TxStatus,
  TxStatusReader,
} from '../ports';

type Undecided = Extract<TombstoneOutcome, { kind: 'UNDECIDED' }>;
import { destroyConnection, dialectFor, type Dialect, type DialectName } from './dialect';
import { mysqlTxRecordSql } from './mysql/txRecordSql';
import { postgresTxRecordSql } from './postgres/txRecordSql';
import { execute, type Statement } from './statements';
import type { TxRecordSql } from './txRecordSql';

const TX_RECORD_SQL: Record<DialectName, TxRecordSql> = {
  mysql: mysqlTxRecordSql,
  postgres: postgresTxRecordSql,
};

/**
 * tx_record's primitives through the user's TypeORM DataSource, in raw SQL: the statements of its
 * database (mysql/txRecordSql.ts, postgres/txRecordSql.ts), the connection handling here. What a
 * tombstone or a duplicate means is decided in src/checkback/fence.ts, nowhere else.
 */
export class TypeOrmTxRecordStore implements TxRecordStore, TxStatusReader {
  private readonly dialect: Dialect;
  private readonly sql: TxRecordSql;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectFor(dataSource);
    this.sql = TX_RECORD_SQL[this.dialect.name];
  }

  async insertCommitted(manager: EntityManager, record: NewTxRecord): Promise<boolean> {
    return this.insert(manager, this.sql.insert(record, 'COMMITTED', 'PRODUCER'));
  }

  async insertTombstone(record: NewTxRecord, lockWaitTimeoutMs: number): Promise<TombstoneOutcome> {
    return this.inTombstoneScope(lockWaitTimeoutMs, async (manager) =>
      (await this.insert(manager, this.sql.insert(record, 'ROLLED_BACK', 'CHECK_BACK')))
        ? { kind: 'INSERTED' }
        : { kind: 'EXISTS' },
    );
  }

  async insertTombstones(
    records: readonly NewTxRecord[],
    lockWaitTimeoutMs: number,
  ): Promise<TombstonesOutcome> {
    // In txId order, so that two instances tombstoning overlapping batches lock rows in one order.
    const sorted = [...records].sort((a, b) => (a.txId < b.txId ? -1 : a.txId > b.txId ? 1 : 0));
    return this.inTombstoneScope(lockWaitTimeoutMs, async (manager) => {
      await execute(manager, this.sql.insertTombstones(sorted));
      return { kind: 'DONE' };
    });
  }

  /**
   * Runs `write` on one connection inside the tombstone's scope (its own short transaction,
   * bounded lock wait). Never throws: any error is UNDECIDED, with its classification.
   */
  private async inTombstoneScope<T>(
    lockWaitTimeoutMs: number,
    write: (manager: EntityManager) => Promise<T>,
  ): Promise<T | Undecided> {
    const scope = this.sql.tombstoneScope(lockWaitTimeoutMs);
    const queryRunner = this.dataSource.createQueryRunner();
    let open = false;
    try {
      await queryRunner.connect();
      open = true;
      await run(queryRunner.manager, scope.open);
      const written = await write(queryRunner.manager);
      await run(queryRunner.manager, scope.close);
      open = false;
      return written;
    } catch (err) {
      // End the scope (PostgreSQL: the aborted transaction and its row lock; MySQL: the session's
      // lock wait) or close the connection, so nothing of it goes back to the pool.
      if (open) await run(queryRunner.manager, scope.abort).catch(() => destroyConnection(queryRunner));
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
    await execute(this.dataSource, this.sql.markConfirmed(txIds));
  }

  async readStatus(txId: string): Promise<TxStatus | undefined> {
    const { rows } = await execute<{ status: TxStatus }>(this.dataSource, this.sql.selectStatus(txId));
    return rows[0]?.status;
  }

  async readStatuses(txIds: readonly string[]): Promise<Map<string, TxRecordState>> {
    const states = new Map<string, TxRecordState>();
    if (txIds.length === 0) return states;
    const { rows } = await execute<{
      tx_id: string;
      status: TxStatus;
      resolved_by: TxRecordState['resolvedBy'];
    }>(this.dataSource, this.sql.selectStatuses(txIds));
    for (const row of rows) states.set(row.tx_id.trim(), { status: row.status, resolvedBy: row.resolved_by });
    return states;
  }

  /** true: inserted; false: the txId exists (committed, or committed while this INSERT waited). */
  private async insert(manager: EntityManager, statement: Statement): Promise<boolean> {
    try {
      return this.sql.inserted(await execute(manager, statement));
    } catch (err) {
      if (this.dialect.classify(err) === 'DUPLICATE_KEY') return false;
      throw err;
    }
  }
}

/** A statement of the tombstone's scope; without parameters, so one may hold several (PostgreSQL). */
async function run(manager: EntityManager, statement: Statement): Promise<void> {
  await manager.query(statement.sql, statement.params.length > 0 ? [...statement.params] : undefined);
}
