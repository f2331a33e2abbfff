import { cursorAdvances } from '../../cursor';
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
    // One round trip: the upsert creates the row at 0 or, on a duplicate, updates it, which takes
    // the row's exclusive lock directly (INSERT IGNORE would take a shared lock first and invite
    // the duplicate-insert deadlock) and reads its latest committed version. LAST_INSERT_ID(expr)
    // hands that version back as the statement's insert id (the table has no AUTO_INCREMENT, so
    // a fresh row reports 0, its version). It also sets the session's LAST_INSERT_ID() until the
    // handler's own first AUTO_INCREMENT insert.
    return {
      sql:
        'INSERT INTO aggregate_cursor (consumer_group, aggregate_type, aggregate_id, last_version)' +
        ' VALUES (?, ?, ?, 0) ON DUPLICATE KEY UPDATE last_version = LAST_INSERT_ID(last_version)',
      params: [key.consumerGroup, key.aggregateType, key.aggregateId],
    };
  },

  cursorVersion: (result) => result.insertId ?? 0,

  claimVersion(key, version, acceptGap) {
    // lockCursor and advanceCursor in one round trip. A new row is created at `version` when it
    // moves (cursorAdvances from 0), else at 0. On a duplicate, the first assignment's
    // LAST_INSERT_ID(last_version) hands the previous version back (as in lockCursor) and the row
    // moves only when `version` is the next one, or later with acceptGap (`moves`). No expression
    // reads a column this statement assigns (last_version is assigned last), so the result is the
    // same whether the server evaluates the assignments left to right or all from the old row
    // (MariaDB's SIMULTANEOUS_ASSIGNMENT).
    const moves = (previous: string) => `(? = ${previous} + 1 OR (? = 1 AND ? > last_version + 1))`;
    const movesParams = [version, acceptGap ? 1 : 0, version];
    const fresh = cursorAdvances(0, version, acceptGap);
    return {
      sql:
        'INSERT INTO aggregate_cursor (consumer_group, aggregate_type, aggregate_id, last_version, skipped_versions)' +
        ' VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE' +
        ` skipped_versions = skipped_versions + IF(${moves('LAST_INSERT_ID(last_version)')}, ? - last_version - 1, 0),` +
        ` updated_at = IF(${moves('last_version')}, CURRENT_TIMESTAMP(3), updated_at),` +
        ` last_version = IF(${moves('last_version')}, ?, last_version)`,
      params: [
        key.consumerGroup,
        key.aggregateType,
        key.aggregateId,
        fresh ? version : 0,
        fresh ? version - 1 : 0,
        ...movesParams,
        version,
        ...movesParams,
        ...movesParams,
        version,
      ],
    };
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
