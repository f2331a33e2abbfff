import { consumedRowValues, type InboxSql } from '../statements';

// PostgreSQL: a failed statement aborts the whole transaction, so a duplicate is never an error
// here: ON CONFLICT DO NOTHING (which, like InnoDB, waits on a concurrent uncommitted insert of
// the same key and then skips or inserts) and RETURNING to tell which.
export const postgresInboxSql: InboxSql = {
  isolation: 'READ COMMITTED',

  insertConsumed(row) {
    return {
      sql:
        'INSERT INTO consumed_event (consumer_group, event_id, event_type, aggregate_type, aggregate_id,' +
        ' aggregate_version, outcome) VALUES ($1, $2, $3, $4, $5, $6, $7)' +
        ' ON CONFLICT (consumer_group, event_id) DO NOTHING RETURNING 1 AS inserted',
      params: consumedRowValues(row),
    };
  },

  inserted: (result) => result.rows.length === 1,

  markOutcome(row, outcome) {
    return {
      sql: 'UPDATE consumed_event SET outcome = $1 WHERE consumer_group = $2 AND event_id = $3',
      params: [outcome, row.consumerGroup, row.eventId],
    };
  },

  lockCursor(key) {
    // One statement: the upsert creates the row or, on conflict, updates it, which takes the
    // row's lock (after waiting for a concurrent holder) and returns the latest committed version.
    return {
      sql:
        'INSERT INTO aggregate_cursor (consumer_group, aggregate_type, aggregate_id, last_version)' +
        ' VALUES ($1, $2, $3, 0) ON CONFLICT (consumer_group, aggregate_type, aggregate_id)' +
        ' DO UPDATE SET last_version = aggregate_cursor.last_version RETURNING last_version',
      params: [key.consumerGroup, key.aggregateType, key.aggregateId],
    };
  },

  cursorVersion: (result) => Number(result.rows[0]?.last_version ?? 0),

  advanceCursor(key, version, skipped) {
    return {
      sql:
        'UPDATE aggregate_cursor SET last_version = $1, skipped_versions = skipped_versions + $2,' +
        ' updated_at = CURRENT_TIMESTAMP(3) WHERE consumer_group = $3 AND aggregate_type = $4 AND aggregate_id = $5',
      params: [version, skipped, key.consumerGroup, key.aggregateType, key.aggregateId],
    };
  },
};
