import type { DataSource } from 'typeorm';
import { dialectFor, type DialectName } from './dialect';

/** Who the connection is: the database (null when none is selected), the account as the server prints it, the version. */
export interface DbIdentity {
  database: string | null;
  /** MySQL/MariaDB: `'user'@'host'`; PostgreSQL: the role name. */
  account: string;
  version: string;
}

/** What information_schema (and pg_catalog) show of the SDK's tables in the current database/schema. */
export interface ActualSchema {
  tables: Array<{ t: string; engine: string | null }>;
  columns: Array<{ t: string; c: string }>;
  /** One row per index column, in index column order; the primary key's index is named PRIMARY. */
  indexes: Array<{ t: string; i: string; nonUnique: number; c: string }>;
}

/**
 * The connected user's privileges: MySQL/MariaDB's SHOW GRANTS lines (never printed: they may
 * hold a password hash), or PostgreSQL's effective privileges per table of the current schema
 * (has_table_privilege, so role memberships count; OWNER when the user owns the table or is a
 * member of its owner, ALL for a superuser).
 */
export type DbGrants =
  | { kind: 'show-grants'; lines: string[] }
  | { kind: 'table-privileges'; tables: Array<{ table: string; privileges: string[] }> };

/** The server's bound on a row-lock wait: MySQL's innodb_lock_wait_timeout, PostgreSQL's lock_timeout (null: none). */
export interface LockWaitSetting {
  name: 'innodb_lock_wait_timeout' | 'lock_timeout';
  /** null: no bound (PostgreSQL's 0). */
  ms: number | null;
}

interface DoctorSql {
  identity(ds: DataSource): Promise<DbIdentity>;
  grants(ds: DataSource, tables: readonly string[]): Promise<DbGrants>;
  schema(ds: DataSource, tables: readonly string[]): Promise<ActualSchema>;
  isolation(ds: DataSource): Promise<string>;
  lockWait(ds: DataSource): Promise<LockWaitSetting>;
  oldestSentAgeUs(ds: DataSource): Promise<unknown>;
  /** The database clock as epoch seconds (a number or a string with a fraction). */
  clock(ds: DataSource): Promise<unknown>;
}

const first = async <T>(p: Promise<unknown>): Promise<T | undefined> => ((await p) as T[])[0];

const MYSQL: DoctorSql = {
  async identity(ds) {
    const r = await first<{ db: string | null; u: string; v: string }>(
      ds.query('SELECT DATABASE() AS db, CURRENT_USER() AS u, VERSION() AS v'),
    );
    const u = String(r?.u ?? '');
    const at = u.lastIndexOf('@');
    return {
      database: r?.db ?? null,
      account: `'${u.slice(0, at)}'@'${u.slice(at + 1)}'`,
      version: String(r?.v ?? ''),
    };
  },
  async grants(ds) {
    const rows = (await ds.query('SHOW GRANTS')) as Array<Record<string, unknown>>;
    return { kind: 'show-grants', lines: rows.map((r) => String(Object.values(r)[0])) };
  },
  async schema(ds, tables) {
    const marks = tables.map(() => '?').join(', ');
    const where = `TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (${marks})`;
    const [t, c, i] = await Promise.all([
      ds.query(`SELECT TABLE_NAME AS t, ENGINE AS engine FROM information_schema.TABLES WHERE ${where}`, [
        ...tables,
      ]),
      ds.query(`SELECT TABLE_NAME AS t, COLUMN_NAME AS c FROM information_schema.COLUMNS WHERE ${where}`, [
        ...tables,
      ]),
      ds.query(
        'SELECT TABLE_NAME AS t, INDEX_NAME AS i, NON_UNIQUE AS nonUnique, COLUMN_NAME AS c' +
          ` FROM information_schema.STATISTICS WHERE ${where} ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX`,
        [...tables],
      ),
    ]);
    return shapeSchema(t, c, i);
  },
  async isolation(ds) {
    // MySQL 8 removed tx_isolation; MariaDB before 11.1 has only tx_isolation.
    for (const v of ['@@SESSION.transaction_isolation', '@@SESSION.tx_isolation']) {
      try {
        const r = await first<{ v: unknown }>(ds.query(`SELECT ${v} AS v`));
        if (r?.v !== undefined && r.v !== null) return String(r.v);
      } catch {
        // Unknown system variable: try the other spelling.
      }
    }
    throw new Error('neither transaction_isolation nor tx_isolation could be read');
  },
  async lockWait(ds) {
    // The session value of one of the DataSource's pooled connections: the server's default, or
    // what the application's pool sets on each connection (what its transactions really get).
    const r = await first<{ v: unknown }>(ds.query('SELECT @@SESSION.innodb_lock_wait_timeout AS v'));
    return { name: 'innodb_lock_wait_timeout', ms: Number(r?.v) * 1000 };
  },
  async oldestSentAgeUs(ds) {
    const r = await first<{ us: unknown }>(
      ds.query(
        "SELECT TIMESTAMPDIFF(MICROSECOND, MIN(next_attempt_at), CURRENT_TIMESTAMP(3)) AS us FROM outbox_event WHERE status = 'SENT'",
      ),
    );
    return r?.us;
  },
  async clock(ds) {
    return (await first<{ t: unknown }>(ds.query('SELECT UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) AS t')))?.t;
  },
};

const PG_PRIVILEGES = ['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'];

const POSTGRES: DoctorSql = {
  async identity(ds) {
    const r = await first<{ db: string | null; u: string; v: string }>(
      ds.query('SELECT current_database() AS db, current_user AS u, version() AS v'),
    );
    return { database: r?.db ?? null, account: String(r?.u ?? ''), version: String(r?.v ?? '') };
  },
  async grants(ds, tables) {
    const columns = PG_PRIVILEGES.map((p) => `has_table_privilege(c.oid, '${p}') AS "${p}"`).join(', ');
    const rows = (await ds.query(
      `SELECT c.relname AS t, ${columns}, pg_has_role(c.relowner, 'USAGE') AS "OWNER",
         (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS "ALL"
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relname = ANY($1)`,
      [[...tables]],
    )) as Array<Record<string, unknown>>;
    const found = rows.map((r) => ({
      table: String(r.t),
      privileges: [...PG_PRIVILEGES, 'OWNER', 'ALL'].filter((p) => r[p] === true),
    }));
    // A superuser holds every privilege, also on a table not created yet (the migrations table
    // before the first run, or one named by migrationsTableName): no row above says so.
    const su = await first<{ s: unknown }>(
      ds.query('SELECT rolsuper AS s FROM pg_roles WHERE rolname = current_user'),
    );
    if (su?.s === true)
      for (const t of tables)
        if (!found.some((f) => f.table === t)) found.push({ table: t, privileges: ['ALL'] });
    return { kind: 'table-privileges', tables: found };
  },
  async schema(ds, tables) {
    const names = [[...tables]];
    const where = 'table_schema = current_schema() AND table_name = ANY($1)';
    const [t, c, i] = await Promise.all([
      ds.query(
        `SELECT table_name AS t, NULL AS engine FROM information_schema.tables WHERE ${where} AND table_type = 'BASE TABLE'`,
        names,
      ),
      ds.query(
        `SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE ${where}`,
        names,
      ),
      // information_schema has no indexes on PostgreSQL: pg_index, one row per key column in order.
      ds.query(
        `SELECT t.relname AS t, CASE WHEN ix.indisprimary THEN 'PRIMARY' ELSE i.relname END AS i,
           CASE WHEN ix.indisunique THEN 0 ELSE 1 END AS "nonUnique", a.attname AS c
         FROM pg_index ix
         JOIN pg_class t ON t.oid = ix.indrelid
         JOIN pg_class i ON i.oid = ix.indexrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace
         CROSS JOIN LATERAL unnest(ix.indkey) WITH ORDINALITY AS k(attnum, ord)
         JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
         WHERE n.nspname = current_schema() AND t.relname = ANY($1) AND has_table_privilege(t.oid, 'SELECT, INSERT, UPDATE, DELETE, REFERENCES')
         ORDER BY t.relname, i.relname, k.ord`,
        names,
      ),
    ]);
    return shapeSchema(t, c, i);
  },
  async isolation(ds) {
    const r = await first<{ v: unknown }>(
      ds.query("SELECT current_setting('default_transaction_isolation') AS v"),
    );
    if (r?.v === undefined || r.v === null)
      throw new Error('default_transaction_isolation could not be read');
    return String(r.v);
  },
  async lockWait(ds) {
    // pg_settings gives the session's lock_timeout in ms (the role's, database's or connection's
    // setting, else the server's); 0 disables it (a lock wait has no bound).
    const r = await first<{ v: unknown }>(
      ds.query("SELECT setting AS v FROM pg_settings WHERE name = 'lock_timeout'"),
    );
    const ms = Number(r?.v);
    return { name: 'lock_timeout', ms: ms > 0 ? ms : null };
  },
  async oldestSentAgeUs(ds) {
    const r = await first<{ us: unknown }>(
      ds.query(
        "SELECT FLOOR(EXTRACT(EPOCH FROM (CURRENT_TIMESTAMP(3) - MIN(next_attempt_at))) * 1000000) AS us FROM outbox_event WHERE status = 'SENT'",
      ),
    );
    return r?.us;
  },
  async clock(ds) {
    return (await first<{ t: unknown }>(ds.query('SELECT EXTRACT(EPOCH FROM clock_timestamp()) AS t')))?.t;
  },
};

function shapeSchema(t: unknown, c: unknown, i: unknown): ActualSchema {
  return {
    tables: t as ActualSchema['tables'],
    columns: c as ActualSchema['columns'],
    indexes: (i as Array<{ t: string; i: string; nonUnique: unknown; c: string }>).map((r) => ({
      ...r,
      nonUnique: Number(r.nonUnique),
    })),
  };
}

const SQL: Record<DialectName, DoctorSql> = { mysql: MYSQL, postgres: POSTGRES };

/** Doctor's read-only measurements (a handful of short statements, no locks), per database. */
export function doctorQueries(ds: DataSource): DoctorSql & { dialect: DialectName } {
  const dialect = dialectFor(ds).name;
  return { ...SQL[dialect], dialect };
}
