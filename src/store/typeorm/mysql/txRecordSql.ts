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

  markConfirmed(txIds) {
    return {
      sql:
        'UPDATE tx_record SET confirmed_at = CURRENT_TIMESTAMP(3)' +
        ` WHERE confirmed_at IS NULL AND tx_id IN (${txIds.map(() => '?').join(', ')})`,
      params: [...txIds],
    };
  },

  tombstoneScope(lockWaitTimeoutMs) {
    // innodb_lock_wait_timeout is whole seconds (MariaDB treats 0 as NOWAIT): round up, at least 1.
    const seconds = Math.max(1, Math.ceil(lockWaitTimeoutMs / 1000));
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
