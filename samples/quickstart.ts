// `npm install rocketmq-tx typeorm reflect-metadata mysql2`; this file commits an order and publishes its event.
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { TransactionalProducer, rocketMqTxEntities, rocketMqTxMigrations } from '../src'; // 'rocketmq-tx'

async function main(): Promise<void> {
  const url = process.env.ROCKETMQ_TX_DB_URL ?? 'mysql://root@127.0.0.1:3306/test';
  const sdk = { entities: rocketMqTxEntities, migrations: rocketMqTxMigrations };
  const migrationsTableName = 'rocketmq_tx_migrations'; // the demo and the CLI use the same
  const dataSource = new DataSource({ type: 'mysql', url, ...sdk, migrationsTableName });
  await dataSource.initialize();
  await dataSource.runMigrations(); // tx_record, outbox_event, consumed_event, aggregate_cursor
  await dataSource.query('CREATE TABLE IF NOT EXISTS qs_order (id VARCHAR(64) PRIMARY KEY, total INT)');
  const endpoints = process.env.ROCKETMQ_ENDPOINTS ?? '127.0.0.1:8081';
  const topics = ['orders_tx']; // a TRANSACTION topic
  const producer = new TransactionalProducer({ endpoints, dataSource, producerGroup: 'quickstart', topics });
  await producer.start();
  const orderId = `o-${Date.now()}`;
  const event = { topic: 'orders_tx', body: { orderId, total: 42 } };
  const { txId } = await producer.transact(event, async (manager) => {
    await manager.query('INSERT INTO qs_order (id, total) VALUES (?, 42)', [orderId]); // same transaction
  });
  console.log(`order ${orderId} committed, its event published (txId ${txId})`);
  await producer.shutdown();
  await dataSource.destroy();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
