/** One DataSource for the sample: the SDK's tables and the sample's, migrated together. */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { rocketMqTxEntities, rocketMqTxMigrations } from '../../src'; // 'rocketmq-tx'
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
      `cannot reach MySQL/MariaDB at ${maskUrl(url)}: ${why}\n` +
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

export function createDataSource(url: string, options: DatabaseOptions = {}): DataSource {
  return new DataSource({
    type: 'mysql',
    url,
    entities: [...rocketMqTxEntities, ...orderServiceEntities],
    // The SDK's migrations and yours in one list; they record themselves in one table.
    migrations: [...rocketMqTxMigrations, ...orderServiceMigrations],
    migrationsTableName: 'rocketmq_tx_migrations',
    poolSize: options.poolSize ?? 10,
    connectTimeout: 5000,
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
    const [lock] = await runner.query("SELECT GET_LOCK('order_service_migrations', 60) AS locked");
    if (Number(lock.locked) !== 1) throw new Error('could not take the migration lock within 60 s');
    try {
      const ran = await dataSource.runMigrations({ transaction: 'none' });
      return ran.map((m) => m.name);
    } finally {
      await runner.query("SELECT RELEASE_LOCK('order_service_migrations')");
    }
  } finally {
    await runner.release();
  }
}
