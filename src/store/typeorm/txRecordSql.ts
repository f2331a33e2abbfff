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
  markConfirmed(txIds: readonly string[]): Statement;
  /**
   * The check-back's tombstone INSERT runs between `open` and `close` on one connection, bounded
   * to wait about `lockWaitTimeoutMs` on another transaction's row; `abort` replaces `close`
   * after an error (and if it fails too, the connection is closed, never pooled).
   */
  tombstoneScope(lockWaitTimeoutMs: number): { open: Statement; close: Statement; abort: Statement };
}
