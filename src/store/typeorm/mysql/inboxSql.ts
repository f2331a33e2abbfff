import { consumedRowValues, type InboxSql } from '../statements';

// MySQL/MariaDB: a duplicate dedupe row fails with ER_DUP_ENTRY, which the store reads as "not
// inserted"; InnoDB keeps the transaction open after a failed statement, so it goes on.
export const mysqlInboxSql: InboxSql = {
  isolation: undefined,

  insertConsumed(row) {
    return {
      sql:
        'INSERT INTO consumed_event (consumer_group, event_id, event_type, aggregate_type, aggregate_id,' +
        ' aggregate_version, outcome) VALUES (?, ?, ?, ?, ?, ?, ?)',
      params: consumedRowValues(row),
    };
  },

  inserted: () => true,

  markOutcome(row, outcome) {
    return {
      sql: 'UPDATE consumed_event SET outcome = ? WHERE consumer_group = ? AND event_id = ?',
      params: [outcome, row.consumerGroup, row.eventId],
    };
  },

  lockCursor(key) {
    const params = [key.consumerGroup, key.aggregateType, key.aggregateId];
    return [
      // An upsert takes the row's exclusive lock directly (INSERT IGNORE would take a shared
      // lock first and invite the duplicate-insert deadlock).
      {
        sql:
          'INSERT INTO aggregate_cursor (consumer_group, aggregate_type, aggregate_id, last_version)' +
          ' VALUES (?, ?, ?, 0) ON DUPLICATE KEY UPDATE last_version = last_version',
        params,
      },
      {
        sql:
          'SELECT last_version FROM aggregate_cursor' +
          ' WHERE consumer_group = ? AND aggregate_type = ? AND aggregate_id = ? FOR UPDATE',
        params,
      },
    ];
  },

  advanceCursor(key, version, skipped) {
    return {
      sql:
        'UPDATE aggregate_cursor SET last_version = ?, skipped_versions = skipped_versions + ?,' +
        ' updated_at = CURRENT_TIMESTAMP(3) WHERE consumer_group = ? AND aggregate_type = ? AND aggregate_id = ?',
      params: [version, skipped, key.consumerGroup, key.aggregateType, key.aggregateId],
    };
  },
};
