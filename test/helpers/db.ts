import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { rocketMqTxMigrations } from '../../src';
import { rocketMqTxEntitiesFor } from '../../src/store/typeorm/entities';
import { DB_URL } from './env';

/** The database a URL names, from its scheme: mysql:// (MySQL/MariaDB) or postgres:// (PostgreSQL). */
export type TestDatabase = 'mysql' | 'postgres';

export function databaseOf(url: string = DB_URL): TestDatabase {
  const scheme = /^([a-z0-9+]+):\/\//i.exec(url)?.[1]?.toLowerCase();
  if (scheme === 'mysql' || scheme === 'mariadb') return 'mysql';
  if (scheme === 'postgres' || scheme === 'postgresql') return 'postgres';
  throw new Error(`ROCKETMQ_TX_DB_URL must start with mysql:// or postgres://, got ${scheme ?? 'no scheme'}`);
}

/** The database the tests run on (ROCKETMQ_TX_DB_URL's scheme). */
export const TEST_DATABASE: TestDatabase = databaseOf();

/** Placeholder n (1-based) of the test database: `?` on MySQL, `$n` on PostgreSQL. */
export function p(n: number, database: TestDatabase = TEST_DATABASE): string {
  return database === 'postgres' ? `$${n}` : '?';
}

/** A comma-separated list of `count` placeholders starting at `from`. */
export function ps(count: number, from = 1, database: TestDatabase = TEST_DATABASE): string {
  return Array.from({ length: count }, (_, i) => p(from + i, database)).join(', ');
}

/**
 * A test's SQL for the test database: written with `?` placeholders (MySQL style), numbered `$n`
 * on PostgreSQL. Only for the tests' own statements (no `?` inside literals).
 */
export function sql(text: string, database: TestDatabase = TEST_DATABASE): string {
  if (database !== 'postgres') return text;
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

/**
 * How many sessions on the test database are blocked on a lock while running a statement that
 * starts with `statementPrefix` (MySQL: the PROCESSLIST, whose text holds the inlined values, so
 * `like` may name one; PostgreSQL: pg_stat_activity of this database, statement prefix only).
 */
export async function lockWaitingStatements(
  ds: DataSource,
  statementPrefix: string,
  like = `${statementPrefix}%`,
): Promise<number> {
  const rows: Array<{ n: string | number }> =
    databaseOfDataSource(ds) === 'postgres'
      ? await ds.query(
          `SELECT COUNT(*) AS n FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`,
          [`${statementPrefix}%`],
        )
      : await ds.query(
          "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE command = 'Query' AND info LIKE ?",
          [like],
        );
  return Number(rows[0]?.n ?? 0);
}

/** A DataSource on the test database with the SDK's entities; the schema is migrated once per run. */
export async function openDataSource(
  overrides: { url?: string; poolSize?: number } = {},
): Promise<DataSource> {
  const url = overrides.url ?? DB_URL;
  const type = databaseOf(url);
  const ds = new DataSource({
    type,
    url,
    entities: [...rocketMqTxEntitiesFor(type)],
    migrations: [...rocketMqTxMigrations],
    migrationsTableName: 'rocketmq_tx_migrations',
    poolSize: overrides.poolSize ?? 10,
    logging: false,
  });
  await ds.initialize();
  return ds;
}

// The test tables, per database: test_order (the producer tests' business row) and
// test_consumer_effect (the consumer tests' effect table: consumer.test.ts, consumer-crash.test.ts,
// consumer-child.ts).
const TEST_TABLES: Record<TestDatabase, string[]> = {
  mysql: [
    `CREATE TABLE IF NOT EXISTS test_order (
       id VARCHAR(64) NOT NULL PRIMARY KEY,
       note VARCHAR(255) NULL,
       created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
     )`,
    `CREATE TABLE IF NOT EXISTS test_consumer_effect (
       id BIGINT AUTO_INCREMENT PRIMARY KEY,
       consumer_group VARCHAR(255) NOT NULL,
       aggregate_id VARCHAR(128) NOT NULL,
       aggregate_version BIGINT NOT NULL,
       event_id CHAR(36) NOT NULL
     )`,
  ],
  postgres: [
    `CREATE TABLE IF NOT EXISTS test_order (
       id VARCHAR(64) NOT NULL PRIMARY KEY,
       note VARCHAR(255) NULL,
       created_at TIMESTAMPTZ(3) NOT NULL DEFAULT now()
     )`,
    `CREATE TABLE IF NOT EXISTS test_consumer_effect (
       id BIGSERIAL PRIMARY KEY,
       consumer_group VARCHAR(255) NOT NULL,
       aggregate_id VARCHAR(128) NOT NULL,
       aggregate_version BIGINT NOT NULL,
       event_id CHAR(36) NOT NULL
     )`,
  ],
};

// A session-level lock serializing the schema set-up across jest workers and child processes.
const SCHEMA_LOCK: Record<TestDatabase, { take: string; release: string }> = {
  mysql: {
    take: "SELECT GET_LOCK('rocketmq_tx_test_schema', 60)",
    release: "SELECT RELEASE_LOCK('rocketmq_tx_test_schema')",
  },
  // 0x726d7174 = 'rmqt': any constant key, the same in every process.
  postgres: {
    take: 'SELECT pg_advisory_lock(1919775092)',
    release: 'SELECT pg_advisory_unlock(1919775092)',
  },
};

/** Runs the SDK migrations and creates the test tables, serialized across jest workers. */
export async function ensureSchema(ds: DataSource): Promise<void> {
  const database = databaseOfDataSource(ds);
  const qr = ds.createQueryRunner();
  await qr.connect();
  try {
    await qr.query(SCHEMA_LOCK[database].take);
    try {
      await ds.runMigrations({ transaction: 'none' });
      for (const ddl of TEST_TABLES[database]) await qr.query(ddl);
    } finally {
      await qr.query(SCHEMA_LOCK[database].release);
    }
  } finally {
    await qr.release();
  }
}

/** The database a DataSource of the tests is on. */
export function databaseOfDataSource(ds: DataSource): TestDatabase {
  return ds.options.type === 'postgres' ? 'postgres' : 'mysql';
}

export async function txRecord(
  ds: DataSource,
  txId: string,
): Promise<{ status: string; resolved_by: string; confirmed_at: Date | null } | undefined> {
  const rows = await ds.query(
    `SELECT status, resolved_by, confirmed_at FROM tx_record WHERE tx_id = ${p(1, databaseOfDataSource(ds))}`,
    [txId],
  );
  return rows[0];
}

export async function orderExists(ds: DataSource, id: string): Promise<boolean> {
  const rows = await ds.query(
    `SELECT 1 AS one FROM test_order WHERE id = ${p(1, databaseOfDataSource(ds))}`,
    [id],
  );
  return rows.length > 0;
}

/** tx_record rows of one producer group: other suites write their own rows at the same time. */
export async function countTxRecords(ds: DataSource, producerGroup: string): Promise<number> {
  const rows = await ds.query(sql('SELECT COUNT(*) AS n FROM tx_record WHERE producer_group = ?'), [
    producerGroup,
  ]);
  return Number(rows[0].n);
}

/** The units the tests shift timestamps by. */
export type IntervalUnit = 'MICROSECOND' | 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY';

function shifted(sign: '-' | '+', amount: number | '?', unit: IntervalUnit, database: TestDatabase): string {
  if (database !== 'postgres') return `CURRENT_TIMESTAMP(3) ${sign} INTERVAL ${amount} ${unit}`;
  const n = amount === '?' ? '?::double precision' : String(amount);
  return `CURRENT_TIMESTAMP(3) ${sign} ${n} * interval '1 ${unit.toLowerCase()}'`;
}

/**
 * The database clock `amount` units ago, as an SQL expression: `amount` is a number or `'?'` (a
 * placeholder: write the statement with `?` and pass it through sql()).
 */
export function ago(
  amount: number | '?',
  unit: IntervalUnit,
  database: TestDatabase = TEST_DATABASE,
): string {
  return shifted('-', amount, unit, database);
}

/** The database clock `amount` units ahead (see ago()). */
export function ahead(
  amount: number | '?',
  unit: IntervalUnit,
  database: TestDatabase = TEST_DATABASE,
): string {
  return shifted('+', amount, unit, database);
}

/** A quoted identifier (a column such as `keys`, reserved on MySQL). */
export function qid(name: string, database: TestDatabase = TEST_DATABASE): string {
  return database === 'postgres' ? `"${name}"` : `\`${name}\``;
}

/** `count` `?` placeholders, comma-separated (for sql()). */
export function qs(count: number): string {
  return Array.from({ length: count }, () => '?').join(', ');
}

/** A driver error as the test database reports a deadlock (what the dialect classifies as one). */
export function deadlockError(database: TestDatabase = TEST_DATABASE): Error {
  return database === 'postgres'
    ? Object.assign(new Error('deadlock detected'), { code: '40P01' })
    : Object.assign(new Error('Deadlock found'), { code: 'ER_LOCK_DEADLOCK', errno: 1213 });
}

/** `url` with its database (path) replaced by `database`. */
export function urlWithDatabase(database: string, url: string = DB_URL): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/**
 * A scratch database `name` on the test server (dropped first if a crashed run left it), with
 * `admin`, a DataSource on the server's test database that created it. drop() drops it (on
 * PostgreSQL with FORCE: pool connections of a failed test may still be open) and closes admin.
 */
export async function createScratchDatabase(
  name: string,
  url: string = DB_URL,
): Promise<{ url: string; admin: DataSource; drop(): Promise<void> }> {
  const database = databaseOf(url);
  const admin = await new DataSource({ type: database, url, poolSize: 2 }).initialize();
  const dropSql =
    database === 'postgres'
      ? `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`
      : `DROP DATABASE IF EXISTS ${name}`;
  await admin.query(dropSql);
  await admin.query(`CREATE DATABASE ${name}`);
  return {
    url: urlWithDatabase(name, url),
    admin,
    drop: async () => {
      try {
        await admin.query(dropSql);
      } finally {
        await admin.destroy();
      }
    },
  };
}
