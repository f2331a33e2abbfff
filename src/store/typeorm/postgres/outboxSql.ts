import type { NewOutboxEvent } from '../../ports';
import { outboxRowValues, type OutboxSql, type Statement } from '../statements';

// PostgreSQL 15+. `$n` placeholders; id lists as one array parameter (`= ANY($n::bpchar[])`,
// bpchar so that the char(36) key's index serves the lookup); intervals as milliseconds times
// interval '1 millisecond'; timestamps timestamptz(3). CURRENT_TIMESTAMP is the transaction's start
// time: every statement here is autocommit or in a short claim transaction.
const NOW = 'CURRENT_TIMESTAMP(3)';
const INSERT_COLUMNS =
  '(event_id, tx_id, topic, tag, keys, properties, aggregate_type, aggregate_id, aggregate_version,' +
  ' event_type, event_version, payload, occurred_at, trace_id, status, attempts, next_attempt_at)';
const FIELDS_PER_ROW = 15;
const MAX_ERROR_CHARS = 2000;
/** The columns of a ClaimedRow. */
const CLAIMED_COLUMNS = 'event_id, tx_id, topic, tag, keys, properties, payload, aggregate_id, attempts';

/** now ± parameter n, in milliseconds. */
const plus = (sign: '+' | '-', n: number): string =>
  `(${NOW} ${sign} $${n}::double precision * interval '1 millisecond')`;
const stmt = (sql: string, params: readonly unknown[]): Statement => ({ sql, params });

function insertRow(row: number): string {
  const p = (i: number) => `$${row * FIELDS_PER_ROW + i}`;
  return (
    `(${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)}, ${p(7)}, ${p(8)}, ${p(9)}, ${p(10)}, ${p(11)},` +
    ` ${p(12)}, COALESCE(${p(13)}::timestamptz, ${NOW}), ${p(14)}, ${p(15)}, 0, ${NOW})`
  );
}

export const postgresOutboxSql: OutboxSql = {
  insertEvents(events: readonly NewOutboxEvent[]) {
    const params: unknown[] = [];
    for (const e of events) {
      params.push(...outboxRowValues(e), e.occurredAt ?? null, e.traceId ?? null, e.status);
    }
    return stmt(
      `INSERT INTO outbox_event ${INSERT_COLUMNS} VALUES ${events.map((_, i) => insertRow(i)).join(', ')}`,
      params,
    );
  },

  duplicateKey(err) {
    // node-postgres: detail 'Key (event_id)=(0193...) already exists.'
    const inner = (err as { driverError?: { detail?: unknown } } | undefined)?.driverError;
    const detail = typeof inner?.detail === 'string' ? inner.detail : '';
    return /^Key \((.{0,200})\)=\((.{0,80})\) already exists/.exec(detail)?.[2];
  },

  markConfirmed(eventIds) {
    return stmt(
      `UPDATE outbox_event SET status = 'SENT', published_at = ${NOW}, lease_until = NULL, lease_owner = NULL
       WHERE status IN ('IN_FLIGHT', 'NEW') AND event_id = ANY($1::bpchar[])`,
      [[...eventIds]],
    );
  },

  selectDue(topics, limit) {
    return stmt(
      `SELECT ${CLAIMED_COLUMNS} FROM outbox_event
       WHERE status = 'NEW' AND next_attempt_at <= ${NOW} AND topic = ANY($1::text[])
       ORDER BY next_attempt_at, event_id LIMIT ${Math.trunc(limit)} FOR UPDATE SKIP LOCKED`,
      [[...topics]],
    );
  },

  leaseDue(eventIds, owner, leaseMs) {
    return stmt(
      `UPDATE outbox_event SET lease_owner = $1, lease_until = ${plus('+', 2)}, next_attempt_at = ${plus('+', 2)}
       WHERE event_id = ANY($3::bpchar[])`,
      [owner, leaseMs, [...eventIds]],
    );
  },

  selectUnconfirmed({ horizonMs, topics, limit, producerGroup }) {
    // The subquery is a plain read: only outbox rows are locked (tx_record stays free for the
    // fence). FOR UPDATE OF o: PostgreSQL would otherwise try to lock every table of the query.
    return stmt(
      `SELECT ${CLAIMED_COLUMNS} FROM outbox_event o
       WHERE o.status = 'IN_FLIGHT' AND o.next_attempt_at <= ${plus('-', 1)}
         AND (o.lease_until IS NULL OR o.lease_until <= ${NOW})
         AND o.topic = ANY($2::text[])
         AND EXISTS (SELECT 1 FROM tx_record t WHERE t.tx_id = o.tx_id AND t.status = 'COMMITTED'${
           producerGroup === undefined ? '' : ' AND t.producer_group = $3'
         })
       ORDER BY o.next_attempt_at, o.event_id LIMIT ${Math.trunc(limit)} FOR UPDATE OF o SKIP LOCKED`,
      [horizonMs, [...topics], ...(producerGroup === undefined ? [] : [producerGroup])],
    );
  },

  leaseUnconfirmed(eventIds, owner, leaseMs) {
    return stmt(
      `UPDATE outbox_event SET lease_owner = $1, lease_until = ${plus('+', 2)}
       WHERE status = 'IN_FLIGHT' AND event_id = ANY($3::bpchar[])`,
      [owner, leaseMs, [...eventIds]],
    );
  },

  releaseUnconfirmed(eventId, owner, error, retryInMs) {
    return stmt(
      `UPDATE outbox_event SET attempts = attempts + 1, last_error = $1, lease_until = ${plus('+', 2)},
         lease_owner = NULL
       WHERE event_id = $3 AND status = 'IN_FLIGHT' AND lease_owner = $4`,
      [error.slice(0, MAX_ERROR_CHARS), retryInMs, eventId, owner],
    );
  },

  markSent(eventId) {
    return stmt(
      `UPDATE outbox_event SET status = 'SENT', published_at = ${NOW}, lease_until = NULL, lease_owner = NULL,
         last_error = NULL
       WHERE event_id = $1 AND status IN ('NEW', 'IN_FLIGHT')`,
      [eventId],
    );
  },

  markSentMany(eventIds) {
    return stmt(
      `UPDATE outbox_event SET status = 'SENT', published_at = ${NOW}, lease_until = NULL, lease_owner = NULL,
         last_error = NULL
       WHERE event_id = ANY($1::bpchar[]) AND status IN ('NEW', 'IN_FLIGHT')`,
      [[...eventIds]],
    );
  },

  markFailed(eventId, owner, error, retryInMs, dead) {
    return stmt(
      `UPDATE outbox_event SET attempts = attempts + 1, last_error = $1, status = $2,
         next_attempt_at = ${plus('+', 3)}, lease_until = NULL, lease_owner = NULL
       WHERE event_id = $4 AND status = 'NEW' AND lease_owner = $5`,
      [error.slice(0, MAX_ERROR_CHARS), dead ? 'DEAD' : 'NEW', retryInMs, eventId, owner],
    );
  },

  promote(eventIds) {
    return stmt(
      `UPDATE outbox_event SET status = 'NEW', next_attempt_at = ${NOW},
         last_error = 'broker commit not confirmed within the check-back horizon'
       WHERE status = 'IN_FLIGHT' AND event_id = ANY($1::bpchar[])`,
      [[...eventIds]],
    );
  },

  replayDead(eventIds) {
    return stmt(
      `UPDATE outbox_event SET status = 'NEW', attempts = 0, next_attempt_at = ${NOW}
       WHERE status = 'DEAD'${eventIds === undefined ? '' : ' AND event_id = ANY($1::bpchar[])'}`,
      eventIds === undefined ? [] : [[...eventIds]],
    );
  },
};
