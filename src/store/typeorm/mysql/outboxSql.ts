import type { NewOutboxEvent } from '../../ports';
import { outboxRowValues, type OutboxSql, type Statement } from '../statements';

// MySQL 8.0+ / MariaDB 10.6+ (SKIP LOCKED). `?` placeholders; `keys` is a reserved word;
// intervals in microseconds; timestamps DATETIME(3) on the database clock.
const NOW = 'CURRENT_TIMESTAMP(3)';
const INSERT_COLUMNS =
  '(event_id, tx_id, topic, tag, `keys`, properties, aggregate_type, aggregate_id, aggregate_version,' +
  ' event_type, event_version, payload, occurred_at, trace_id, status, attempts, next_attempt_at)';
const INSERT_ROW = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE(?, ${NOW}), ?, ?, 0, ${NOW})`;
const MAX_ERROR_CHARS = 2000;
/** The columns of a ClaimedRow. */
const CLAIMED_COLUMNS = 'event_id, tx_id, topic, tag, `keys`, properties, payload, aggregate_id, attempts';

const list = (values: readonly unknown[]): string => values.map(() => '?').join(', ') || 'NULL';
/** now ± a parameter in microseconds. */
const plus = (sign: '+' | '-'): string => `(${NOW} ${sign} INTERVAL ? MICROSECOND)`;
const micros = (ms: number): number => Math.round(ms * 1000);
const stmt = (sql: string, params: readonly unknown[]): Statement => ({ sql, params });

export const mysqlOutboxSql: OutboxSql = {
  insertEvents(events: readonly NewOutboxEvent[]) {
    const params: unknown[] = [];
    for (const e of events) {
      params.push(...outboxRowValues(e), e.occurredAt ?? null, e.traceId ?? null, e.status);
    }
    return stmt(
      `INSERT INTO outbox_event ${INSERT_COLUMNS} VALUES ${events.map(() => INSERT_ROW).join(', ')}`,
      params,
    );
  },

  duplicateKey(err) {
    return /Duplicate entry '([^']{0,80})/.exec(err instanceof Error ? err.message : '')?.[1];
  },

  markConfirmed(eventIds) {
    return stmt(
      `UPDATE outbox_event SET status = 'SENT', published_at = ${NOW}, lease_until = NULL, lease_owner = NULL
       WHERE status IN ('IN_FLIGHT', 'NEW') AND event_id IN (${list(eventIds)})`,
      eventIds,
    );
  },

  selectDue(topics, limit) {
    return stmt(
      `SELECT ${CLAIMED_COLUMNS} FROM outbox_event
       WHERE status = 'NEW' AND next_attempt_at <= ${NOW} AND topic IN (${list(topics)})
       ORDER BY next_attempt_at, event_id LIMIT ${Math.trunc(limit)} FOR UPDATE SKIP LOCKED`,
      topics,
    );
  },

  leaseDue(eventIds, owner, leaseMs) {
    return stmt(
      `UPDATE outbox_event SET lease_owner = ?, lease_until = ${plus('+')}, next_attempt_at = ${plus('+')}
       WHERE event_id IN (${list(eventIds)})`,
      [owner, micros(leaseMs), micros(leaseMs), ...eventIds],
    );
  },

  selectUnconfirmed({ horizonMs, topics, limit, producerGroup }) {
    // The subquery is a plain read: only outbox rows are locked (tx_record stays free for the fence).
    return stmt(
      `SELECT ${CLAIMED_COLUMNS} FROM outbox_event o
       WHERE o.status = 'IN_FLIGHT' AND o.next_attempt_at <= ${plus('-')}
         AND (o.lease_until IS NULL OR o.lease_until <= ${NOW})
         AND o.topic IN (${list(topics)})
         AND EXISTS (SELECT 1 FROM tx_record t WHERE t.tx_id = o.tx_id AND t.status = 'COMMITTED'${
           producerGroup === undefined ? '' : ' AND t.producer_group = ?'
         })
       ORDER BY o.next_attempt_at, o.event_id LIMIT ${Math.trunc(limit)} FOR UPDATE SKIP LOCKED`,
      [micros(horizonMs), ...topics, ...(producerGroup === undefined ? [] : [producerGroup])],
    );
  },

  leaseUnconfirmed(eventIds, owner, leaseMs) {
    return stmt(
      `UPDATE outbox_event SET lease_owner = ?, lease_until = ${plus('+')}
       WHERE status = 'IN_FLIGHT' AND event_id IN (${list(eventIds)})`,
      [owner, micros(leaseMs), ...eventIds],
    );
  },

  releaseUnconfirmed(eventId, owner, error, retryInMs) {
    return stmt(
      `UPDATE outbox_event SET attempts = attempts + 1, last_error = ?, lease_until = ${plus('+')},
         lease_owner = NULL
       WHERE event_id = ? AND status = 'IN_FLIGHT' AND lease_owner = ?`,
      [error.slice(0, MAX_ERROR_CHARS), micros(retryInMs), eventId, owner],
    );
  },

  markSent(eventId) {
    return stmt(
      `UPDATE outbox_event SET status = 'SENT', published_at = ${NOW}, lease_until = NULL, lease_owner = NULL,
         last_error = NULL
       WHERE event_id = ? AND status IN ('NEW', 'IN_FLIGHT')`,
      [eventId],
    );
  },

  markSentMany(eventIds) {
    return stmt(
      `UPDATE outbox_event SET status = 'SENT', published_at = ${NOW}, lease_until = NULL, lease_owner = NULL,
         last_error = NULL
       WHERE event_id IN (${list(eventIds)}) AND status IN ('NEW', 'IN_FLIGHT')`,
      eventIds,
    );
  },

  markFailed(eventId, owner, error, retryInMs, dead) {
    return stmt(
      `UPDATE outbox_event SET attempts = attempts + 1, last_error = ?, status = ?,
         next_attempt_at = ${plus('+')}, lease_until = NULL, lease_owner = NULL
       WHERE event_id = ? AND status = 'NEW' AND lease_owner = ?`,
      [error.slice(0, MAX_ERROR_CHARS), dead ? 'DEAD' : 'NEW', micros(retryInMs), eventId, owner],
    );
  },

  promote(eventIds) {
    return stmt(
      `UPDATE outbox_event SET status = 'NEW', next_attempt_at = ${NOW},
         last_error = 'broker commit not confirmed within the check-back horizon'
       WHERE status = 'IN_FLIGHT' AND event_id IN (${list(eventIds)})`,
      eventIds,
    );
  },

  replayDead(eventIds) {
    const filter = eventIds === undefined ? '' : ` AND event_id IN (${list(eventIds)})`;
    return stmt(
      `UPDATE outbox_event SET status = 'NEW', attempts = 0, next_attempt_at = ${NOW}
       WHERE status = 'DEAD'${filter}`,
      eventIds ?? [],
    );
  },
};
