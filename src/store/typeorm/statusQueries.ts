import type { DataSource } from 'typeorm';
import { dialectFor, type Dialect, type DialectName } from './dialect';
import { SqlParams } from './sqlParams';
import { toStoreError } from './storeError';

/** The filter of a status read (validated by the caller). */
export interface StatusFilter {
  topics: readonly string[] | null;
  consumerGroups: readonly string[] | null;
  discardHorizonMs: number;
}

/** One row of each status statement, as the driver returns it (numbers may be strings). */
export interface StatusRows {
  txRecords: ReadonlyArray<{ status: string; resolved_by: string; n: unknown }>;
  /** kind 'count': per (topic, status); kind 'pending': undelivered per (topic, status) with age; kind 'in_doubt': one row; kind 'in_doubt_state': one row per state (in `status`). */
  outbox: ReadonlyArray<{
    k: string;
    topic: string | null;
    status: string | null;
    n: unknown;
    age_us: unknown;
    txs: unknown;
  }>;
  consumed: ReadonlyArray<{ consumer_group: string; outcome: string; n: unknown }>;
}

export interface StatusQuery {
  sql: string;
  params: unknown[];
}

/** The per-database time arithmetic of the status statements. */
interface StatusSql {
  /** Microseconds from `expr` to now, on the database clock. */
  ageUs(expr: string): string;
  /** now minus a parameter of microseconds. */
  beforeNow(p: SqlParams, us: number): string;
  /** A NULL of the age and count columns' types (PostgreSQL types a UNION's columns from the first rows). */
  nullAge: string;
  nullCount: string;
}

const SQL: Record<DialectName, StatusSql> = {
  mysql: {
    ageUs: (expr) => `TIMESTAMPDIFF(MICROSECOND, ${expr}, CURRENT_TIMESTAMP(3))`,
    beforeNow: (p, us) => `(CURRENT_TIMESTAMP(3) - INTERVAL ${p.add(us)} MICROSECOND)`,
    nullAge: 'NULL',
    nullCount: 'NULL',
  },
  // No TIMESTAMPDIFF: the epoch difference of two timestamps, in seconds with a fraction.
  postgres: {
    ageUs: (expr) => `FLOOR(EXTRACT(EPOCH FROM (CURRENT_TIMESTAMP(3) - ${expr})) * 1000000)`,
    beforeNow: (p, us) =>
      `(CURRENT_TIMESTAMP(3) - CAST(${p.add(us)} AS double precision) * INTERVAL '1 microsecond')`,
    nullAge: 'CAST(NULL AS double precision)',
    nullCount: 'CAST(NULL AS bigint)',
  },
};

function inList(p: SqlParams, column: string, values: readonly string[] | null): string {
  if (values === null) return '1 = 1';
  return `${column} IN (${p.list(values)})`;
}

export function txRecordQuery(dialect: Dialect, filter: StatusFilter): StatusQuery {
  const p = new SqlParams(dialect);
  const sql =
    'SELECT status, resolved_by, COUNT(*) AS n FROM tx_record' +
    ` WHERE ${inList(p, 'topic', filter.topics)} GROUP BY status, resolved_by`;
  return { sql, params: p.values };
}

/** Counts per (topic, status), undelivered ages, in-doubt transactions and their states: one UNION ALL. */
export function outboxQuery(dialect: Dialect, filter: StatusFilter): StatusQuery {
  const { ageUs, beforeNow, nullAge, nullCount } = SQL[dialect.name];
  const p = new SqlParams(dialect);
  const counts =
    `SELECT 'count' AS k, topic, status, COUNT(*) AS n, ${nullAge} AS age_us, ${nullCount} AS txs FROM outbox_event` +
    ` WHERE ${inList(p, 'topic', filter.topics)} GROUP BY topic, status`;
  const pending =
    "SELECT 'pending' AS k, o.topic, o.status, COUNT(*) AS n," +
    ` ${ageUs('MIN(COALESCE(t.created_at, o.occurred_at))')} AS age_us, ${nullCount} AS txs` +
    ' FROM outbox_event o LEFT JOIN tx_record t ON t.tx_id = o.tx_id' +
    ` WHERE o.status IN ('NEW', 'IN_FLIGHT') AND ${inList(p, 'o.topic', filter.topics)}` +
    ' GROUP BY o.topic, o.status';
  // IN_FLIGHT rows keep next_attempt_at = their insert time (the relay never leases them).
  const inDoubt =
    "SELECT 'in_doubt' AS k, NULL AS topic, NULL AS status, COUNT(*) AS n," +
    ` ${ageUs('MIN(COALESCE(t.created_at, o.next_attempt_at))')} AS age_us, COUNT(DISTINCT o.tx_id) AS txs` +
    ' FROM outbox_event o LEFT JOIN tx_record t ON t.tx_id = o.tx_id' +
    ` WHERE o.status = 'IN_FLIGHT' AND ${inList(p, 'o.topic', filter.topics)}`;
  // A discard recovery leases a row (lease_until) or reschedules it after a failure (attempts).
  const byState =
    "SELECT 'in_doubt_state' AS k, NULL AS topic," +
    " CASE WHEN o.lease_until IS NOT NULL OR o.attempts > 0 THEN 'republishing'" +
    ` WHEN o.next_attempt_at <= ${beforeNow(p, filter.discardHorizonMs * 1000)} THEN 'overdue' ELSE 'awaiting_broker' END AS status,` +
    ` COUNT(*) AS n, ${ageUs('MIN(COALESCE(t.created_at, o.next_attempt_at))')} AS age_us,` +
    ' COUNT(DISTINCT o.tx_id) AS txs' +
    ' FROM outbox_event o LEFT JOIN tx_record t ON t.tx_id = o.tx_id' +
    ` WHERE o.status = 'IN_FLIGHT' AND ${inList(p, 'o.topic', filter.topics)} GROUP BY 3`;
  return {
    sql: `${counts} UNION ALL ${pending} UNION ALL ${inDoubt} UNION ALL ${byState}`,
    params: p.values,
  };
}

export function consumedQuery(dialect: Dialect, filter: StatusFilter): StatusQuery {
  const p = new SqlParams(dialect);
  const sql =
    'SELECT consumer_group, outcome, COUNT(*) AS n FROM consumed_event' +
    ` WHERE ${inList(p, 'consumer_group', filter.consumerGroups)} GROUP BY consumer_group, outcome`;
  return { sql, params: p.values };
}

type StatusTable = 'tx_record' | 'outbox_event' | 'consumed_event';

async function run(ds: DataSource, table: StatusTable, q: StatusQuery): Promise<unknown[]> {
  try {
    const rows: unknown = await ds.query(q.sql, q.params);
    if (!Array.isArray(rows)) throw new Error('the driver returned no rows');
    return rows;
  } catch (err) {
    throw toStoreError(`status: the ${table} query failed`, err);
  }
}

/**
 * The status snapshot's three statements (one per table), run in parallel; read-only, no locks.
 * A failure is a StoreError naming the table (StoreAccessDeniedError for a missing privilege).
 */
export async function readStatusRows(ds: DataSource, filter: StatusFilter): Promise<StatusRows> {
  const dialect = dialectFor(ds);
  const [txRecords, outbox, consumed] = await Promise.all([
    run(ds, 'tx_record', txRecordQuery(dialect, filter)),
    run(ds, 'outbox_event', outboxQuery(dialect, filter)),
    run(ds, 'consumed_event', consumedQuery(dialect, filter)),
  ]);
  return {
    txRecords: txRecords as StatusRows['txRecords'],
    outbox: outbox as StatusRows['outbox'],
    consumed: consumed as StatusRows['consumed'],
  };
}

/** Only the outbox statement (doctor's backlog and in-doubt checks); the driver's error as it is. */
export async function readOutboxStatusRows(
  ds: DataSource,
  filter: StatusFilter,
): Promise<StatusRows['outbox']> {
  const q = outboxQuery(dialectFor(ds), filter);
  return (await ds.query(q.sql, q.params)) as StatusRows['outbox'];
}
