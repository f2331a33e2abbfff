// From install to the first committed event: `npm install rocketmq-tx typeorm reflect-metadata mysql2`.
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { TransactionalProducer, rocketMqTxEntities, rocketMqTxMigrations } from '../src'; // 'rocketmq-tx'

async function main(): Promise<void> {
  const dataSource = new DataSource({
    type: 'mysql',
    url: process.env.ROCKETMQ_TX_DB_URL ?? 'mysql://root@127.0.0.1:3306/test',
    entities: [...rocketMqTxEntities],
    migrations: [...rocketMqTxMigrations],
  });
  await dataSource.initialize();
  await dataSource.runMigrations();
  const producer = new TransactionalProducer({
    endpoints: process.env.ROCKETMQ_ENDPOINTS ?? '127.0.0.1:8081',
    dataSource,
    producerGroup: 'quickstart',
    topics: ['orders_tx'],
  });
  await producer.start();
  const { txId } = await producer.transact(
    { topic: 'orders_tx', body: { hello: 'world' } },
    async (manager) => {
      await manager.query('SELECT 1'); // your business change, in the same transaction
    },
  );
  console.log(`committed and published: txId=${txId}`);
  await producer.shutdown();
  await dataSource.destroy();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
