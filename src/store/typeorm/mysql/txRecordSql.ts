import type { TxRecordSql } from '../txRecordSql';

// MySQL/MariaDB: the tombstone is an autocommit INSERT (InnoDB makes it wait on the producer's
// uncommitted row) under the session's innodb_lock_wait_timeout, saved and set in one round
// trip, restored (and the variable cleared) in one more.
const restore: { sql: string; params: readonly unknown[] } = {
  sql: 'SET SESSION innodb_lock_wait_timeout = @rocketmq_tx_lock_wait, @rocketmq_tx_lock_wait = NULL',
  params: [],
};

export const mysqlTxRecordSql: TxRecordSql = {
  insert(record, status, resolvedBy) {
    return {
      sql:
        'INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count)' +
        ' VALUES (?, ?, ?, ?, ?, ?)',
      params: [record.txId, status, resolvedBy, record.producerGroup, record.topic, record.eventCount],
    };
  },

  // A duplicate failed the statement (ER_DUP_ENTRY): reaching here means inserted.
  inserted: () => true,

  selectStatus: (txId) => ({ sql: 'SELECT status FROM tx_record WHERE tx_id = ?', params: [txId] }),

  selectStatuses: (txIds) => ({
    sql: `SELECT tx_id, status, resolved_by FROM tx_record WHERE tx_id IN (${txIds.map(() => '?').join(', ')})`,
    params: [...txIds],
  }),

  // ON DUPLICATE KEY UPDATE (a no-op) rather than INSERT IGNORE, which would also turn other
  // errors into warnings; a duplicate waits on the producer's uncommitted row as the single
  // INSERT does (an exclusive lock on the duplicate), then changes nothing.
  insertTombstones(records) {
    return {
      sql:
        'INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count) VALUES ' +
        records.map(() => "(?, 'ROLLED_BACK', 'CHECK_BACK', ?, ?, ?)").join(', ') +
        ' ON DUPLICATE KEY UPDATE tx_id = tx_id',
      params: records.flatMap((r) => [r.txId, r.producerGroup, r.topic, r.eventCount]),
    };
  },

  markConfirmed(txIds) {
    return {
      sql:
        'UPDATE tx_record SET confirmed_at = CURRENT_TIMESTAMP(3)' +
        ` WHERE confirmed_at IS NULL AND tx_id IN (${txIds.map(() => '?').join(', ')})`,
      params: [...txIds],
    };
  },

  tombstoneScope(lockWaitTimeoutMs) {
    // innodb_lock_wait_timeout is whole seconds: round up, at least 1; 0 (the batched tombstones'
    // "do not wait") is NOWAIT on MariaDB, and MySQL takes it as its minimum, 1 s.
    const seconds = lockWaitTimeoutMs === 0 ? 0 : Math.max(1, Math.ceil(lockWaitTimeoutMs / 1000));
    return {
      open: {
        sql: `SET @rocketmq_tx_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = ${seconds}`,
        params: [],
      },
      close: restore,
      abort: restore,
    };
  },
};
