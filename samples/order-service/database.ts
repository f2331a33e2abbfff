/** One DataSource for the sample: the SDK's tables and the sample's, migrated together. */
import 'reflect-metadata';
import * as mysql2 from 'mysql2';
import { DataSource } from 'typeorm';
import { rocketMqTxEntitiesFor, rocketMqTxMigrations } from '../../src'; // 'rocketmq-tx'
import { orderServiceEntities } from './entities';
import { orderServiceMigrations } from './migrations';

export const DEFAULT_DB_URL = 'mysql://root@127.0.0.1:3306/test';

/** The URL with its password replaced by *** (for messages and logs). */
export function maskUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@');
  }
}

/** The database could not be reached: says where it looked and how to point elsewhere. */
export class DatabaseUnreachableError extends Error {
  constructor(url: string, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(
      `cannot reach the database at ${maskUrl(url)}: ${why}\n` +
        '  Start one (e.g. `docker compose -f docker/docker-compose.yml up -d mysql`), or point the demo at yours:\n' +
        '  ROCKETMQ_TX_DB_URL=mysql://user:password@host:3306/database npm run demo',
    );
    this.name = 'DatabaseUnreachableError';
  }
}

export interface DatabaseOptions {
  poolSize?: number;
  /** TypeORM entity subscribers (the crash sample uses one). */
  // eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
  subscribers?: Function[];
}

/** The database a URL names: postgres:// or postgresql:// (PostgreSQL), anything else MySQL/MariaDB. */
export function databaseOf(url: string): 'mysql' | 'postgres' {
  return /^postgres(ql)?:\/\//i.test(url) ? 'postgres' : 'mysql';
}

/**
 * The sample's own SQL, written with `?` placeholders, for the DataSource's database (`$n` on
 * PostgreSQL); resolves with the rows and the number of rows changed.
 */
export async function run<Row = Record<string, unknown>>(
  dataSource: DataSource,
  text: string,
  params: unknown[] = [],
): Promise<{ rows: Row[]; affected: number }> {
  let n = 0;
  const sql = dataSource.options.type === 'postgres' ? text.replace(/\?/g, () => `$${++n}`) : text;
  const runner = dataSource.createQueryRunner();
  try {
    const result = await runner.query(sql, params, true);
    return { rows: Array.isArray(result.records) ? result.records : [], affected: result.affected ?? 0 };
  } finally {
    await runner.release();
  }
}

/**
 * The lock-wait bound of the service's own transactions, set on every pooled connection: well
 * under the broker's check horizon (the local broker's is 11 s), so a transaction stuck on a lock
 * fails before the broker stops asking about its half message (`doctor`'s db.lock-wait-timeout;
 * docs/doctor.md). The SDK's fence sets its own, shorter bound for its statement.
 */
export const LOCK_WAIT_SECONDS = 5;

/** mysql2, with each pooled connection's innodb_lock_wait_timeout set once, when the pool opens it. */
const mysqlWithLockWait: typeof mysql2 = {
  ...mysql2,
  createPool(config: mysql2.PoolOptions) {
    const pool = mysql2.createPool(config);
    // Queued before any other statement on the connection; on failure the connection keeps the
    // server's default, which doctor reports.
    pool.on('connection', (conn) => {
      conn.query(`SET SESSION innodb_lock_wait_timeout = ${LOCK_WAIT_SECONDS}`, () => undefined);
    });
    return pool;
  },
} as typeof mysql2;

export function createDataSource(url: string, options: DatabaseOptions = {}): DataSource {
  const type = databaseOf(url);
  return new DataSource({
    type,
    url,
    ...(type === 'postgres'
      ? { extra: { options: `-c lock_timeout=${LOCK_WAIT_SECONDS}s` } }
      : { driver: mysqlWithLockWait, connectorPackage: 'mysql2' as const }),
    entities: [...rocketMqTxEntitiesFor(type), ...orderServiceEntities],
    // The SDK's migrations and yours in one list; they record themselves in one table.
    migrations: [...rocketMqTxMigrations, ...orderServiceMigrations],
    migrationsTableName: 'rocketmq_tx_migrations',
    poolSize: options.poolSize ?? 10,
    ...(type === 'postgres' ? { connectTimeoutMS: 5000 } : { connectTimeout: 5000 }),
    subscribers: options.subscribers ?? [],
    logging: false,
  });
}

/** Connects; a connection failure becomes a DatabaseUnreachableError (password masked). */
export async function openDatabase(url: string, options: DatabaseOptions = {}): Promise<DataSource> {
  const dataSource = createDataSource(url, options);
  try {
    await dataSource.initialize();
  } catch (err) {
    throw new DatabaseUnreachableError(url, err);
  }
  return dataSource;
}

/**
 * Runs the pending migrations under a named lock, so several instances starting at once do not
 * race on the DDL. Resolves with the names of the migrations it ran.
 */
export async function migrate(dataSource: DataSource): Promise<string[]> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    const pg = dataSource.options.type === 'postgres';
    // A session lock: GET_LOCK (MySQL/MariaDB) or an advisory lock (PostgreSQL; any constant key).
    const [lock] = await runner.query(
      pg
        ? 'SELECT pg_advisory_lock(7264211) AS locked'
        : "SELECT GET_LOCK('order_service_migrations', 60) AS locked",
    );
    if (!pg && Number(lock.locked) !== 1) throw new Error('could not take the migration lock within 60 s');
    try {
      const ran = await dataSource.runMigrations({ transaction: 'none' });
      return ran.map((m) => m.name);
    } finally {
      await runner.query(
        pg ? 'SELECT pg_advisory_unlock(7264211)' : "SELECT RELEASE_LOCK('order_service_migrations')",
      );
    }
  } finally {
    await runner.release();
  }
}

/** The rows of the sample's own query (see run). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function select<Row = any>(
  dataSource: DataSource,
  text: string,
  params: unknown[] = [],
): Promise<Row[]> {
  return (await run<Row>(dataSource, text, params)).rows;
}
