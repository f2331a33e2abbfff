import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { rocketMqTxEntities, rocketMqTxMigrations } from '../../src';
import { DB_URL } from './env';

/** A DataSource on the test database with the SDK's entities; the schema is migrated once per run. */
export async function openDataSource(
  overrides: { url?: string; poolSize?: number } = {},
): Promise<DataSource> {
  const ds = new DataSource({
    type: 'mysql',
    url: overrides.url ?? DB_URL,
    entities: [...rocketMqTxEntities],
    migrations: [...rocketMqTxMigrations],
    migrationsTableName: 'rocketmq_tx_migrations',
    poolSize: overrides.poolSize ?? 10,
    logging: false,
  });
  await ds.initialize();
  return ds;
}

/** Runs the SDK migrations and creates the test business table, serialized across jest workers. */
export async function ensureSchema(ds: DataSource): Promise<void> {
  const qr = ds.createQueryRunner();
  await qr.connect();
  try {
    await qr.query("SELECT GET_LOCK('rocketmq_tx_test_schema', 60)");
    try {
      await ds.runMigrations({ transaction: 'none' });
      await qr.query(
        `CREATE TABLE IF NOT EXISTS test_order (
           id VARCHAR(64) NOT NULL PRIMARY KEY,
           note VARCHAR(255) NULL,
           created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
         )`,
      );
      // The consumer tests' effect table (consumer.test.ts, consumer-crash.test.ts, consumer-child.ts).
      await qr.query(
        `CREATE TABLE IF NOT EXISTS test_consumer_effect (
           id BIGINT AUTO_INCREMENT PRIMARY KEY,
           consumer_group VARCHAR(255) NOT NULL,
           aggregate_id VARCHAR(128) NOT NULL,
           aggregate_version BIGINT NOT NULL,
           event_id CHAR(36) NOT NULL
         )`,
      );
    } finally {
      await qr.query("SELECT RELEASE_LOCK('rocketmq_tx_test_schema')");
    }
  } finally {
    await qr.release();
  }
}

export async function txRecord(
  ds: DataSource,
  txId: string,
): Promise<{ status: string; resolved_by: string; confirmed_at: Date | null } | undefined> {
  const rows = await ds.query('SELECT status, resolved_by, confirmed_at FROM tx_record WHERE tx_id = ?', [
    txId,
  ]);
  return rows[0];
}

export async function orderExists(ds: DataSource, id: string): Promise<boolean> {
  const rows = await ds.query('SELECT 1 AS one FROM test_order WHERE id = ?', [id]);
  return rows.length > 0;
}

export async function countRows(ds: DataSource, table: 'tx_record' | 'test_order'): Promise<number> {
  const rows = await ds.query(`SELECT COUNT(*) AS n FROM ${table}`);
  return Number(rows[0].n);
}
