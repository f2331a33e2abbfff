import type { TxRecordSql } from '../txRecordSql';

// PostgreSQL: a failed statement aborts the whole transaction, so a duplicate is never an error
// here: ON CONFLICT DO NOTHING (which waits on a concurrent uncommitted insert of the same key,
// then skips or inserts) and RETURNING to tell which. The tombstone runs in its own transaction:
// READ COMMITTED pinned (under REPEATABLE READ or SERIALIZABLE, ON CONFLICT fails with 40001 when
// the conflicting row commits after the snapshot) and SET LOCAL lock_timeout, which ends with
// the transaction whatever happens to it (no restore round trip, no pooled session left changed).
export const postgresTxRecordSql: TxRecordSql = {
  insert(record, status, resolvedBy) {
    return {
      sql:
        'INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count)' +
        ' VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tx_id) DO NOTHING RETURNING tx_id',
      params: [record.txId, status, resolvedBy, record.producerGroup, record.topic, record.eventCount],
    };
  },

  inserted: (result) => result.rows.length === 1,

  selectStatus: (txId) => ({ sql: 'SELECT status FROM tx_record WHERE tx_id = $1', params: [txId] }),

  selectStatuses: (txIds) => ({
    sql: 'SELECT tx_id, status, resolved_by FROM tx_record WHERE tx_id = ANY($1::bpchar[])',
    params: [[...txIds]],
  }),

  insertTombstones(records) {
    return {
      sql:
        'INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count) VALUES ' +
        records
          .map(
            (_, i) =>
              `($${i * 4 + 1}, 'ROLLED_BACK', 'CHECK_BACK', $${i * 4 + 2}, $${i * 4 + 3}, $${i * 4 + 4})`,
          )
          .join(', ') +
        ' ON CONFLICT (tx_id) DO NOTHING',
      params: records.flatMap((r) => [r.txId, r.producerGroup, r.topic, r.eventCount]),
    };
  },

  markConfirmed(txIds) {
    return {
      sql:
        'UPDATE tx_record SET confirmed_at = CURRENT_TIMESTAMP(3)' +
        ' WHERE confirmed_at IS NULL AND tx_id = ANY($1::bpchar[])',
      params: [[...txIds]],
    };
  },

  tombstoneScope(lockWaitTimeoutMs) {
    // lock_timeout is milliseconds (0 disables it: at least 1, which is also the batched
    // tombstones' "do not wait"). An integer, inlined: a simple query (no parameters) may hold
    // both statements, one round trip.
    const ms = Math.max(1, Math.ceil(lockWaitTimeoutMs));
    return {
      open: { sql: `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '${ms}ms'`, params: [] },
      close: { sql: 'COMMIT', params: [] },
      abort: { sql: 'ROLLBACK', params: [] },
    };
  },
};
