import type { DataSource, EntityManager } from 'typeorm';
import { dialectFor, type Dialect, type DialectName } from './dialect';
import { ARCHIVED_OUTBOX_COLUMNS } from './outboxArchiveMigrations';
import { OUTBOX_ARCHIVE_TABLE } from './outboxFacts';
import { changedRows, SqlParams } from './sqlParams';

export type RetentionTableName = 'outbox_event' | 'tx_record' | 'consumed_event';

/** The ages (ms) past which rows may go, one per table. */
export interface RetentionAges {
  /** SENT outbox rows published before this age. */
  outboxMs: number;
  /** tx_records created before this age (and with no outbox row left that is not SENT). */
  txRecordMs: number;
  /** consumed_event rows consumed before this age. */
  consumedMs: number;
}

/** The per-database parts of the retention statements. */
interface RetentionSql {
  /** `now - ageMs` on the database clock. */
  cutoff(p: SqlParams, ageMs: number): string;
  /** One short autocommit DELETE of at most `limit` eligible rows; returns the rows deleted. */
  deleteBatch(
    ds: DataSource,
    dialect: Dialect,
    table: RetentionTableName,
    ages: RetentionAges,
    limit: number,
  ): Promise<number>;
  /**
   * Inside a short READ COMMITTED transaction: moves at most `limit` eligible SENT rows to the
   * archive (a key already archived is not copied twice); returns the rows moved. `beforeDelete`
   * is a test seam that may throw to interrupt the batch (the transaction rolls back).
   */
  archiveBatch(
    manager: EntityManager,
    dialect: Dialect,
    ages: RetentionAges,
    limit: number,
    beforeDelete?: (eventIds: readonly string[]) => Promise<void>,
  ): Promise<number>;
  /** Quotes an identifier. */
  quote(name: string): string;
}

/** Which rows may go: one rule per table, shared by purge, archive and plan. */
function eligible(sql: RetentionSql, p: SqlParams, table: RetentionTableName, ages: RetentionAges): string {
  switch (table) {
    // next_attempt_at keeps it a range read on idx_outbox_status_next (published_at has no index);
    // a SENT row's next_attempt_at is at most one lease after its publish.
    // A CDC row (delivery 'cdc') has no publish time: it goes by age alone; the engine reads the
    // binlog, not the table, so removing the row does not stop its publication.
    case 'outbox_event':
      return `status IN ('SENT', 'CDC') AND next_attempt_at < ${sql.cutoff(p, ages.outboxMs)}
          AND (status = 'CDC' OR published_at < ${sql.cutoff(p, ages.outboxMs)})`;
    case 'tx_record':
      return `created_at < ${sql.cutoff(p, ages.txRecordMs)}
          AND NOT EXISTS (SELECT 1 FROM outbox_event o WHERE o.tx_id = tx_record.tx_id AND o.status NOT IN ('SENT', 'CDC'))`;
    case 'consumed_event':
      return `consumed_at < ${sql.cutoff(p, ages.consumedMs)}`;
  }
}

const MYSQL: RetentionSql = {
  cutoff: (p, ageMs) => `CURRENT_TIMESTAMP(3) - INTERVAL ${p.add(ageMs * 1000)} MICROSECOND`,
  quote: (name) => `\`${name}\``,
  async deleteBatch(ds, dialect, table, ages, limit) {
    const p = new SqlParams(dialect);
    const where = eligible(MYSQL, p, table, ages);
    const res: unknown = await ds.query(
      `DELETE FROM ${table} WHERE ${where} LIMIT ${p.add(limit)}`,
      p.values,
    );
    return changedRows(dialect, res);
  },
  async archiveBatch(manager, dialect, ages, limit, beforeDelete) {
    // Lock a batch of eligible keys (SKIP LOCKED: parallel archivers take disjoint rows), copy
    // them, delete the same keys.
    const p = new SqlParams(dialect);
    const where = eligible(MYSQL, p, 'outbox_event', ages);
    const keys: Array<{ event_id: string }> = await manager.query(
      `SELECT event_id FROM outbox_event WHERE ${where} LIMIT ${p.add(limit)} FOR UPDATE SKIP LOCKED`,
      p.values,
    );
    if (keys.length === 0) return 0;
    const ids = keys.map((k) => k.event_id);
    const c = new SqlParams(dialect);
    const columns = ARCHIVED_OUTBOX_COLUMNS.map((col) => MYSQL.quote(col)).join(', ');
    await manager.query(
      `INSERT INTO ${OUTBOX_ARCHIVE_TABLE} (${columns}, archived_at)
       SELECT ${columns}, CURRENT_TIMESTAMP(3) FROM outbox_event WHERE event_id IN (${c.list(ids)})
       ON DUPLICATE KEY UPDATE archived_at = ${OUTBOX_ARCHIVE_TABLE}.archived_at`,
      c.values,
    );
    if (beforeDelete) await beforeDelete(ids);
    const d = new SqlParams(dialect);
    const res: unknown = await manager.query(
      `DELETE FROM outbox_event WHERE event_id IN (${d.list(ids)})`,
      d.values,
    );
    return changedRows(dialect, res);
  },
};

/** Primary key of each table: PostgreSQL has no DELETE ... LIMIT, so a batch is chosen by key. */
const KEYS: Record<RetentionTableName, string> = {
  outbox_event: 'event_id',
  tx_record: 'tx_id',
  consumed_event: 'consumer_group, event_id',
};

const POSTGRES: RetentionSql = {
  cutoff: (p, ageMs) =>
    `(CURRENT_TIMESTAMP(3) - CAST(${p.add(ageMs)} AS double precision) * INTERVAL '1 millisecond')`,
  quote: (name) => `"${name}"`,
  async deleteBatch(ds, dialect, table, ages, limit) {
    // No DELETE ... LIMIT: the batch is the keys of at most `limit` eligible rows, read once in a
    // MATERIALIZED CTE. Not `key IN (SELECT ... LIMIT n)`: the planner may rescan that subquery
    // and delete more than n (seen on 15). No FOR UPDATE: it needs the UPDATE privilege on
    // PostgreSQL; the DELETE locks each row itself and checks the rule again on it, so a row
    // another purger took or changed meanwhile is skipped.
    const p = new SqlParams(dialect);
    const keys = KEYS[table].split(', ');
    const inner = eligible(POSTGRES, p, table, ages);
    const limitMark = p.add(limit);
    const outer = eligible(POSTGRES, p, table, ages);
    const res: unknown = await ds.query(
      `WITH batch AS MATERIALIZED
         (SELECT ${keys.join(', ')} FROM ${table} WHERE ${inner} LIMIT ${limitMark})
       DELETE FROM ${table} USING batch
       WHERE ${keys.map((k) => `${table}.${k} = batch.${k}`).join(' AND ')} AND ${outer}`,
      p.values,
    );
    return changedRows(dialect, res);
  },
  async archiveBatch(manager, dialect, ages, limit, beforeDelete) {
    // One statement: delete a batch of eligible keys and copy exactly the rows deleted (RETURNING),
    // so a row is in one table or the other whatever runs in parallel (the DELETE locks and
    // re-checks each row; a row another archiver moved is skipped). No FOR UPDATE (it needs the
    // UPDATE privilege on PostgreSQL). The seam runs after it, before the commit.
    const p = new SqlParams(dialect);
    const inner = eligible(POSTGRES, p, 'outbox_event', ages);
    const limitMark = p.add(limit);
    const outer = eligible(POSTGRES, p, 'outbox_event', ages);
    const columns = ARCHIVED_OUTBOX_COLUMNS.map((c) => POSTGRES.quote(c)).join(', ');
    const moved: Array<{ event_id: string }> = await manager.query(
      `WITH batch AS MATERIALIZED (SELECT event_id FROM outbox_event WHERE ${inner} LIMIT ${limitMark}),
       moved AS (
         DELETE FROM outbox_event USING batch
         WHERE outbox_event.event_id = batch.event_id AND ${outer}
         RETURNING outbox_event.*
       ),
       copied AS (
         INSERT INTO ${OUTBOX_ARCHIVE_TABLE} (${columns}, archived_at)
         SELECT ${columns}, CURRENT_TIMESTAMP(3) FROM moved
         ON CONFLICT (event_id) DO NOTHING
       )
       SELECT event_id FROM moved`,
      p.values,
    );
    if (moved.length > 0 && beforeDelete) await beforeDelete(moved.map((m) => m.event_id));
    return moved.length;
  },
};

const SQL: Record<DialectName, RetentionSql> = { mysql: MYSQL, postgres: POSTGRES };

/**
 * Retention's statements on the SDK tables, per database: counts of eligible rows, bounded
 * DELETE batches, and the archive batch (copy and delete the same keys in one transaction).
 */
export class TypeOrmRetentionStore {
  private readonly dialect: Dialect;
  private readonly sql: RetentionSql;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectFor(dataSource);
    this.sql = SQL[this.dialect.name];
  }

  get dialectName(): DialectName {
    return this.dialect.name;
  }

  /** How many rows of the table may go now. */
  async count(table: RetentionTableName, ages: RetentionAges): Promise<number> {
    const p = new SqlParams(this.dialect);
    const where = eligible(this.sql, p, table, ages);
    const rows: Array<{ n: number | string }> = await this.dataSource.query(
      `SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`,
      p.values,
    );
    return Number(rows[0]?.n ?? 0);
  }

  /** One short autocommit DELETE of at most `limit` eligible rows; the rows deleted. */
  deleteBatch(table: RetentionTableName, ages: RetentionAges, limit: number): Promise<number> {
    return this.sql.deleteBatch(this.dataSource, this.dialect, table, ages, limit);
  }

  /**
   * One short READ COMMITTED transaction (no gap locks, so parallel archivers and the relay do
   * not deadlock on them) that moves at most `limit` eligible SENT rows to the archive; returns
   * the rows moved. `beforeDelete` is a test seam (MySQL: after the copy, before the delete;
   * PostgreSQL: after the one statement that moves the batch, before the commit).
   */
  archiveBatch(
    ages: RetentionAges,
    limit: number,
    beforeDelete?: (eventIds: readonly string[]) => Promise<void>,
  ): Promise<number> {
    return this.dataSource.transaction('READ COMMITTED', (manager) =>
      this.sql.archiveBatch(manager, this.dialect, ages, limit, beforeDelete),
    );
  }
}
