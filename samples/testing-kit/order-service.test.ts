/**
 * rocketmq-tx/testing in a jest unit test, no broker: the order service's producer side and the
 * inventory service's handler, on SQLite in memory (better-sqlite3; dev dependency). On SQLite
 * the consumer keeps its dedupe and cursor rows in memory (the SDK's tables need MySQL/MariaDB or
 * PostgreSQL); on those databases pass your DataSource and it uses the real tables.
 */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { InMemoryConsumer, InMemoryProducer } from '../../src/testing'; // 'rocketmq-tx/testing'
import { OrderService, OrderRejectedError } from '../order-service/orderService';
import { reserveStock } from '../order-service/inventory';
import { Reservation, ShopOrder, Stock } from '../order-service/entities';

describe('the order service and the inventory handler with rocketmq-tx/testing', () => {
  let dataSource: DataSource;
  let producer: InMemoryProducer;
  let service: OrderService;

  beforeEach(async () => {
    dataSource = new DataSource({
      type: 'better-sqlite3',
      database: ':memory:',
      entities: [ShopOrder, Stock, Reservation],
    });
    await dataSource.initialize();
    // The sample's entities default their timestamps the MySQL way (CURRENT_TIMESTAMP(3)), which
    // SQLite cannot parse: let SQLite's table default fill them instead.
    for (const [entity, column] of [
      [ShopOrder, 'createdAt'],
      [Reservation, 'reservedAt'],
    ] as const) {
      dataSource.getMetadata(entity).findColumnWithPropertyName(column)!.default = undefined;
    }
    await dataSource.query(
      'CREATE TABLE shop_order (id varchar PRIMARY KEY, customer varchar, sku varchar, qty int, channel varchar, tx_id char(36), created_at datetime DEFAULT CURRENT_TIMESTAMP)',
    );
    await dataSource.query(
      'CREATE TABLE inventory_stock (sku varchar PRIMARY KEY, available int, reserved int DEFAULT 0)',
    );
    await dataSource.query(
      'CREATE TABLE inventory_reservation (order_id varchar PRIMARY KEY, sku varchar, qty int, status varchar, event_id char(36) UNIQUE, reserved_at datetime DEFAULT CURRENT_TIMESTAMP)',
    );
    await dataSource.query("INSERT INTO inventory_stock (sku, available, reserved) VALUES ('sku-1', 100, 0)");
    producer = new InMemoryProducer({ dataSource, topics: ['orders_tx', 'orders'] });
    service = new OrderService(producer, { txTopic: 'orders_tx', eventsTopic: 'orders', tag: 'test' });
  });

  afterEach(async () => {
    await producer.shutdown();
    await dataSource.destroy();
  });

  const order = (id: string, qty = 2) => ({
    id,
    customer: 'alice',
    sku: 'sku-1',
    qty,
    channel: 'checkout' as const,
  });

  it('records the event only when the transaction commits', async () => {
    await service.placeOrder(order('o-1'));
    // Over the credit limit: the service's transaction rolls back, so nothing may be sent.
    await expect(service.placeOrder(order('o-2', 25))).rejects.toBeInstanceOf(OrderRejectedError);
    expect(producer.sent.map((m) => m.envelope?.aggregateId)).toEqual(['o-1']);
    expect(producer.stats).toEqual({ committed: 1, rolledBack: 1 });
    expect(await dataSource.getRepository(ShopOrder).count()).toBe(1);
  });

  it('the handler is idempotent and order-safe: shuffled, every message twice, one effect each', async () => {
    for (let i = 0; i < 5; i++) await service.placeOrder(order(`o-${i}`, 1));
    const consumer = new InMemoryConsumer({
      dataSource,
      consumerGroup: 'inventory',
      handlers: [reserveStock],
    });
    expect(consumer.inbox).toBe('memory');
    const report = await consumer.deliverAll(producer.sent, { order: 'shuffle', seed: 42, duplicate: true });
    expect(report.applied).toHaveLength(5);
    expect(report.duplicates).toBe(5);
    expect(report.deadLettered).toEqual([]);
    const stock = await dataSource.getRepository(Stock).findOneByOrFail({ sku: 'sku-1' });
    expect(stock).toMatchObject({ available: 95, reserved: 5 });
    expect(await dataSource.getRepository(Reservation).count()).toBe(5);
  });

  it('a redelivery after a failed handler applies the effect once', async () => {
    await service.placeOrder(order('o-9', 1));
    let failOnce = true;
    const flaky = {
      ...reserveStock,
      handle: async (...args: Parameters<typeof reserveStock.handle>) => {
        await reserveStock.handle(...args);
        if (failOnce) {
          failOnce = false;
          throw new Error('the process died after the handler wrote');
        }
      },
    };
    const consumer = new InMemoryConsumer({ dataSource, consumerGroup: 'inventory', handlers: [flaky] });
    const [message] = producer.sent;
    expect((await consumer.deliver(message!)).kind).toBe('HANDLER_FAILED');
    expect(await dataSource.getRepository(Reservation).count()).toBe(0); // rolled back with the inbox row
    expect((await consumer.deliver(message!, { deliveryAttempt: 2 })).kind).toBe('APPLIED');
    expect((await consumer.deliver(message!, { deliveryAttempt: 3 })).kind).toBe('DUPLICATE');
    expect(await dataSource.getRepository(Reservation).count()).toBe(1);
  });

  it('publish joins the caller transaction: recorded on commit, dropped on rollback', async () => {
    await dataSource.transaction(async (manager) => {
      await producer.publish(manager, { topic: 'orders', body: { n: 1 } });
    });
    await expect(
      dataSource.transaction(async (manager) => {
        await producer.publish(manager, { topic: 'orders', body: { n: 2 } });
        throw new Error('business rollback');
      }),
    ).rejects.toThrow('business rollback');
    expect(producer.sent.map((m) => m.body.toString())).toEqual(['{"n":1}']);
    expect(producer.stats).toEqual({ committed: 1, rolledBack: 1 });
  });
});
