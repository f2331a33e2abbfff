import type { DataSource, EntityManager } from 'typeorm';
import type { FenceOutcome, NewTxRecord, TxRecordStore, TxStatus, TxStatusReader } from '../ports';
import { dialectFor, type Dialect } from './dialect';

const COLUMNS = '(tx_id, status, resolved_by, producer_group, topic, event_count)';

/** tx_record through the user's TypeORM DataSource, in raw SQL: one round trip per fence write. */
export class TypeOrmTxRecordStore implements TxRecordStore, TxStatusReader {
  private readonly dialect: Dialect;
  private readonly insertSql: string;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectFor(dataSource);
    const p = (i: number) => this.dialect.placeholder(i);
    this.insertSql = `INSERT INTO tx_record ${COLUMNS} VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)})`;
  }

  async insertCommitted(manager: EntityManager, record: NewTxRecord): Promise<boolean> {
    try {
      await manager.query(this.insertSql, this.params(record, 'COMMITTED', 'PRODUCER'));
      return true;
    } catch (err) {
      if (this.dialect.classify(err) === 'DUPLICATE_KEY') return false;
      throw err;
    }
  }

  async fence(record: NewTxRecord, lockWaitTimeoutMs: number): Promise<FenceOutcome> {
    const queryRunner = this.dataSource.createQueryRunner();
    try {
      await queryRunner.connect();
      // A row already there is final (a tx_record's status never changes): answer it in one
      // round trip. A plain read never sees an uncommitted row, so "no row" decides nothing:
      // only then does the tombstone INSERT decide, as below.
      const existing = await this.readStatusWith(queryRunner.manager, record.txId);
      if (existing !== undefined) return { kind: existing };
      return await this.dialect.withLockWait(queryRunner, lockWaitTimeoutMs, async () => {
        try {
          // Autocommit INSERT: it waits on the producer's uncommitted row, so InnoDB decides once.
          await queryRunner.query(this.insertSql, this.params(record, 'ROLLED_BACK', 'CHECK_BACK'));
          return { kind: 'FENCED' } as const;
        } catch (err) {
          const kind = this.dialect.classify(err);
          if (kind === 'LOCK_WAIT_TIMEOUT')
            return { kind: 'UNDECIDED', reason: 'LOCK_WAIT_TIMEOUT', error: err } as const;
          if (kind === 'DEADLOCK') return { kind: 'UNDECIDED', reason: 'DEADLOCK', error: err } as const;
          if (kind !== 'DUPLICATE_KEY')
            return { kind: 'UNDECIDED', reason: 'DATABASE_ERROR', error: err } as const;
        }
        // A new autocommit statement is a fresh read: it sees the winner's committed row.
        const status = await this.readStatusWith(queryRunner.manager, record.txId);
        if (status === undefined) {
          return {
            kind: 'UNDECIDED',
            reason: 'DATABASE_ERROR',
            error: new Error(`tx_record ${record.txId} reported as duplicate but not found`),
          } as const;
        }
        return { kind: status };
      });
    } catch (err) {
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

  readStatus(txId: string): Promise<TxStatus | undefined> {
    return this.readStatusWith(this.dataSource.manager, txId);
  }

  private async readStatusWith(manager: EntityManager, txId: string): Promise<TxStatus | undefined> {
    const rows: Array<{ status: TxStatus }> = await manager.query(
      `SELECT status FROM tx_record WHERE tx_id = ${this.dialect.placeholder(1)}`,
      [txId],
    );
    return rows[0]?.status;
  }

  private params(record: NewTxRecord, status: TxStatus, resolvedBy: 'PRODUCER' | 'CHECK_BACK'): unknown[] {
    return [record.txId, status, resolvedBy, record.producerGroup, record.topic, record.eventCount];
  }
}
