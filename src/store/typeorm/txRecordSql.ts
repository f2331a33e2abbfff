import type { NewTxRecord, TxStatus } from '../ports';
import type { Statement, StatementResult } from './statements';

/**
 * The tx_record statements of one database (mysql/txRecordSql.ts, postgres/txRecordSql.ts; see
 * TypeOrmTxRecordStore for how they are run). Primitives only: what a tombstone or a duplicate
 * means is decided in src/checkback/fence.ts.
 */
export interface TxRecordSql {
  /**
   * INSERT of one row. A duplicate either fails with a DUPLICATE_KEY error (MySQL/MariaDB, whose
   * transaction stays usable) or is skipped, `inserted(result)` false (PostgreSQL: a failed
   * statement would abort the caller's whole transaction).
   */
  insert(record: NewTxRecord, status: TxStatus, resolvedBy: 'PRODUCER' | 'CHECK_BACK'): Statement;
  inserted(result: StatementResult<Record<string, unknown>>): boolean;
  /** Rows of `status` for one txId (a plain read: a new statement). */
  selectStatus(txId: string): Statement;
  /** tx_id, status and resolved_by of the rows of many txIds (a plain read). */
  selectStatuses(txIds: readonly string[]): Statement;
  /**
   * One INSERT of many tombstones (ROLLED_BACK, CHECK_BACK) that skips a duplicate instead of
   * failing, and waits on another transaction's uncommitted row of the same txId like the
   * single insert; run in the tombstone's scope.
   */
  insertTombstones(records: readonly NewTxRecord[]): Statement;
  markConfirmed(txIds: readonly string[]): Statement;
  /**
   * The check-back's tombstone INSERT runs between `open` and `close` on one connection, bounded
   * to wait about `lockWaitTimeoutMs` on another transaction's row (0: as little as the database
   * allows: NOWAIT on MariaDB, 1 s on MySQL, 1 ms on PostgreSQL); `abort` replaces `close`
   * after an error (and if it fails too, the connection is closed, never pooled).
   */
  tombstoneScope(lockWaitTimeoutMs: number): { open: Statement; close: Statement; abort: Statement };
}
