/** Where the bench runs and what it may use: its own topics, groups and scratch database. */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { rocketMqTxEntitiesFor, rocketMqTxMigrations } from '../../src';
// The tests' scheme rule and placeholder numbering, not a copy of them.
import { databaseOf, sql as sqlFor, type TestDatabase } from '../../test/helpers/db';

// The local broker's gRPC port moves with ROCKETMQ_TX_PORT_OFFSET (scripts/rocketmq.js).
export const ENDPOINTS: string =
  process.env.ROCKETMQ_ENDPOINTS ?? `127.0.0.1:${8081 + Number(process.env.ROCKETMQ_TX_PORT_OFFSET || 0)}`;

/** The shared database URL; the bench only borrows its server and uses its own database. */
const BASE_URL: string = process.env.ROCKETMQ_TX_DB_URL ?? 'mysql://root@127.0.0.1:3306/test';
export const BENCH_DB = process.env.BENCH_DB ?? 'rmqtx_bench';

export function dbUrl(database: string): string {
  const u = new URL(BASE_URL);
  u.pathname = `/${database}`;
  return u.toString();
}

export const BENCH_DB_URL = dbUrl(BENCH_DB);

/** The database the bench runs on, from ROCKETMQ_TX_DB_URL's scheme (mysql:// or postgres://). */
export type BenchDatabase = TestDatabase;
export const BENCH_DATABASE: BenchDatabase = databaseOf(BASE_URL);

/** The bench's own SQL (written with `?`) for the bench database: `$n` placeholders on PostgreSQL. */
export function sql(text: string): string {
  return sqlFor(text, BENCH_DATABASE);
}

/** The business row every bench transaction writes (id, note). */
export const INSERT_BENCH_ORDER = sql('INSERT INTO bench_order (id, note) VALUES (?, ?)');

/** Topics created by scripts/rocketmq.js start for the bench (scripts/topics.json). */
export const TOPICS = {
  ours: 'bench_tx_0',
  baseline: 'bench_tx_1',
  raw: 'bench_tx_2',
  java: 'bench_tx_3',
  official: 'bench_tx_4',
  rawlean: 'bench_tx_5',
  publish: 'bench_tx_6',
  normal: 'bench_normal_0',
} as const;

/**
 * Producer groups named after the scratch database (one group per database, as DESIGN.md asks): the
 * proxy sends a check-back to any producer of the topic, and a second bench run on the same broker
 * with another database must answer "not mine" (TX_ORIGIN), never fence the first run's transactions.
 */
export const GROUPS = {
  ours: `${BENCH_DB}_ours`,
  baseline: `${BENCH_DB}_baseline`,
  raw: `${BENCH_DB}_raw`,
  java: `${BENCH_DB}_java`,
  official: `${BENCH_DB}_official`,
  rawlean: `${BENCH_DB}_rawlean`,
  publish: `${BENCH_DB}_publish`,
  checkBack: `${BENCH_DB}_checkback`,
  relay: `${BENCH_DB}_relay`,
} as const;

/** Connections per column: the same pool size for every column. */
export const POOL_SIZE = 16;

export const quietLogger = { info() {}, warn() {}, error() {}, debug() {} };

export function openBenchDataSource(poolSize = POOL_SIZE): Promise<DataSource> {
  const ds = new DataSource({
    type: BENCH_DATABASE,
    url: BENCH_DB_URL,
    entities: [...rocketMqTxEntitiesFor(BENCH_DATABASE)],
    migrations: [...rocketMqTxMigrations],
    migrationsTableName: 'rocketmq_tx_migrations',
    poolSize,
    logging: false,
  });
  return ds.initialize();
}

/**
 * Creates the scratch database, runs the SDK migrations there, creates the business table and
 * empties the bench's own tables (only in the scratch database, never in the shared one).
 */
export async function prepareBenchDatabase(): Promise<void> {
  if (BENCH_DB === 'test') throw new Error('BENCH_DB must not be the shared test database');
  if (!/^[a-z0-9_]+$/i.test(BENCH_DB))
    throw new Error(`BENCH_DB must be letters, digits and _, got ${BENCH_DB}`);
  const postgres = BENCH_DATABASE === 'postgres';
  const admin = new DataSource({
    type: BENCH_DATABASE,
    url: dbUrl(postgres ? 'postgres' : 'mysql'),
    logging: false,
  });
  await admin.initialize();
  try {
    if (!postgres) await admin.query(`CREATE DATABASE IF NOT EXISTS \`${BENCH_DB}\``);
    else if ((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [BENCH_DB])).length === 0)
      await admin.query(`CREATE DATABASE "${BENCH_DB}"`);
  } finally {
    await admin.destroy();
  }
  const ds = await openBenchDataSource(2);
  try {
    await ds.runMigrations({ transaction: 'none' });
    await ds.query(
      `CREATE TABLE IF NOT EXISTS bench_order (
         id VARCHAR(64) NOT NULL PRIMARY KEY,
         note VARCHAR(255) NULL,
         created_at ${postgres ? 'TIMESTAMPTZ(3) NOT NULL DEFAULT now()' : 'DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)'}
       )`,
    );
    for (const table of ['bench_order', 'tx_record', 'outbox_event', 'consumed_event', 'aggregate_cursor']) {
      await ds.query(`TRUNCATE TABLE ${table}`);
    }
  } finally {
    await ds.destroy();
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A `--name=<integer ≥ min>` argument of the bench scripts (min 1 unless given), or `dflt`. */
export function intArg(name: string, dflt: number, min = 1): number {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  const n = a ? Number(a.split('=')[1]) : dflt;
  if (!Number.isInteger(n) || n < min)
    throw new Error(`--${name} must be an integer ≥ ${min}, got ${String(n)}`);
  return n;
}
