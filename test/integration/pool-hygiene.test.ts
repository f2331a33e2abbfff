import 'reflect-metadata';
import { DataSource, type EntitySubscriberInterface } from 'typeorm';
import { rocketMqTxEntitiesFor, uuidv7 } from '../../src';
import { TEST_DATABASE, ensureSchema, openDataSource, orderExists, sql, txRecord } from '../helpers/db';
import { DB_URL } from '../helpers/env';
import { makeProducer } from '../helpers/producer';

const TOPIC = 'rmqtx_tx_4';
let armed = false;

/** A user subscriber that throws before ROLLBACK is sent: TypeORM then leaves the transaction open. */
class ThrowingRollbackSubscriber implements EntitySubscriberInterface {
  beforeTransactionRollback(): void {
    if (armed) throw new Error('subscriber failed before rollback');
  }
}

describe('a failed TypeORM rollback never leaks an open transaction into the pool', () => {
  let ds: DataSource;
  let plain: DataSource;

  beforeAll(async () => {
    plain = await openDataSource();
    await ensureSchema(plain);
    ds = new DataSource({
      type: TEST_DATABASE,
      url: DB_URL,
      entities: [...rocketMqTxEntitiesFor(TEST_DATABASE)],
      subscribers: [ThrowingRollbackSubscriber],
      poolSize: 1, // the next borrower gets the very same connection
    });
    await ds.initialize();
  });

  afterAll(async () => {
    await ds?.destroy();
    await plain?.destroy();
  });

  it('work fails and the rollback subscriber throws: nothing of the transaction is ever committed', async () => {
    const producer = makeProducer(ds, { topics: [TOPIC], producerGroup: 'it_pool_hygiene' });
    await producer.start();
    const orderId = `hygiene-${uuidv7()}`;
    const boom = new Error('business failure');
    let txId = '';
    try {
      armed = true;
      await expect(
        producer.transact({ topic: TOPIC, body: 'x' }, async (m, ctx) => {
          txId = ctx.txId;
          await m.query(sql('INSERT INTO test_order (id) VALUES (?)'), [orderId]);
          throw boom;
        }),
      ).rejects.toBe(boom);
      armed = false;
      // The next borrower of the single pooled connection starts and commits a transaction.
      await ds.transaction(async (m) => {
        await m.query('SELECT 1');
      });
      expect(await orderExists(plain, orderId)).toBe(false);
      expect(await txRecord(plain, txId)).toBeUndefined();
    } finally {
      armed = false;
      await producer.shutdown();
    }
  });
});
