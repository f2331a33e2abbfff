/**
 * rocketmq-tx demo: an order service that commits orders and publishes "order created" events
 * through transactional messages, on a real RocketMQ broker and MariaDB/MySQL.
 *
 *   npm run demo        (starts the local broker if needed)
 *
 * Environment: ROCKETMQ_ENDPOINTS (default 127.0.0.1:8081), ROCKETMQ_TX_DB_URL
 * (default mysql://root@127.0.0.1:3306/test), DEMO_ORDERS (default 5).
 */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { SimpleConsumer } from 'rocketmq-client-nodejs';
import { rocketMqTxEntities, rocketMqTxMigrations, TransactionalProducer, type Logger } from '../src';

const ENDPOINTS = process.env.ROCKETMQ_ENDPOINTS ?? '127.0.0.1:8081';
const DB_URL = process.env.ROCKETMQ_TX_DB_URL ?? 'mysql://root@127.0.0.1:3306/test';
const ORDERS = Number(process.env.DEMO_ORDERS ?? 5);
const TOPIC = 'orders_tx';

const say = (line: string) => process.stdout.write(`${line}\n`);
const logger: Logger = {
  debug: () => undefined,
  info: (f, m) => say(`  [sdk] ${m} ${JSON.stringify(f)}`),
  warn: (f, m) => say(`  [sdk warn] ${m} ${JSON.stringify(f)}`),
  error: (f, m) => say(`  [sdk error] ${m} ${JSON.stringify(f)}`),
};

async function main(): Promise<void> {
  say(
    `rocketmq-tx demo: broker ${ENDPOINTS}, database ${DB_URL.replace(/\/\/([^:@]+):[^@]*@/, '//$1:***@')}`,
  );
  const dataSource = new DataSource({
    type: 'mysql',
    url: DB_URL,
    entities: [...rocketMqTxEntities],
    migrations: [...rocketMqTxMigrations],
    migrationsTableName: 'rocketmq_tx_migrations',
  });
  await dataSource.initialize();
  await dataSource.runMigrations({ transaction: 'none' });
  await dataSource.query(
    `CREATE TABLE IF NOT EXISTS demo_order (
       id VARCHAR(64) NOT NULL PRIMARY KEY, customer VARCHAR(64) NOT NULL, total INT NOT NULL, tx_id CHAR(36) NOT NULL)`,
  );

  // A consumer to watch what is delivered (a plain client here; the SDK's IdempotentConsumer dedupes).
  const received = new Map<string, string>();
  const consumer = new SimpleConsumer({
    endpoints: ENDPOINTS,
    namespace: '',
    consumerGroup: `orders_demo_watch_${Date.now()}`,
    subscriptions: new Map([[TOPIC, '*']]),
    awaitDuration: 5000,
    requestTimeout: 3000,
    logger: { info() {}, warn() {}, error() {}, debug() {} },
  });
  await consumer.startup();
  let polling = true;
  let rounds = 0;
  const loop = (async () => {
    while (polling) {
      const views = await consumer.receive(16, 15_000).catch(() => []);
      for (const v of views) {
        received.set(v.properties.get('TX_ID') ?? v.messageId, v.body.toString());
        await consumer.ack(v).catch(() => undefined);
      }
      rounds++;
    }
  })();
  while (rounds === 0) await new Promise((r) => setTimeout(r, 100));

  const producer = new TransactionalProducer({
    endpoints: ENDPOINTS,
    dataSource,
    producerGroup: 'orders_demo',
    topics: [TOPIC],
    logger,
  });
  await producer.start();
  say('producer started; placing orders');

  const committed: string[] = [];
  for (let i = 1; i <= ORDERS; i++) {
    const id = `order-${Date.now()}-${i}`;
    const t0 = Date.now();
    const out = await producer.transact(
      {
        topic: TOPIC,
        tag: 'OrderCreated',
        keys: [id],
        body: { orderId: id, customer: `c${i}`, total: i * 10 },
      },
      async (manager, { txId }) => {
        await manager.query('INSERT INTO demo_order (id, customer, total, tx_id) VALUES (?, ?, ?, ?)', [
          id,
          `c${i}`,
          i * 10,
          txId,
        ]);
      },
    );
    committed.push(out.txId);
    say(`  committed ${id} txId=${out.txId} in ${Date.now() - t0} ms`);
  }

  say('placing an order whose business rule fails (the local transaction rolls back)');
  let rolledBackTx = '';
  try {
    await producer.transact({ topic: TOPIC, body: { orderId: 'bad', total: -1 } }, async (_m, { txId }) => {
      rolledBackTx = txId;
      throw new Error('total must be positive');
    });
  } catch (err) {
    say(`  transact threw the business error unchanged: ${(err as Error).message}`);
  }

  const deadline = Date.now() + 30_000;
  while (committed.some((tx) => !received.has(tx)) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
  const delivered = committed.filter((tx) => received.has(tx)).length;
  const rows = await dataSource.query(
    `SELECT status, COUNT(*) AS n FROM tx_record WHERE producer_group = 'orders_demo' GROUP BY status`,
  );
  say('');
  say(
    `summary: ${committed.length} committed -> ${delivered} delivered; 1 rolled back -> ${received.has(rolledBackTx) ? 1 : 0} delivered`,
  );
  say(
    `tx_record for orders_demo: ${rows.map((r: { status: string; n: number }) => `${r.status}=${r.n}`).join(', ')}`,
  );
  say(`producer stats: ${JSON.stringify(producer.stats)}`);

  await producer.shutdown();
  polling = false;
  await loop;
  await consumer.shutdown().catch(() => undefined);
  await dataSource.destroy();
  if (delivered !== committed.length || received.has(rolledBackTx)) {
    say('demo FAILED: delivery did not match the database');
    process.exit(1);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`demo failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
