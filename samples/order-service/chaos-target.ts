/**
 * The order service as a target of the crash-window runner:
 *   npx rocketmq-tx chaos --module samples/order-service/chaos-target.ts --topic <TRANSACTION topic>
 * Every process opens the sample's database (ROCKETMQ_TX_DB_URL) and places checkout orders
 * through the real OrderService; some customers go over their credit limit, so some
 * transactions roll back on purpose.
 */
import type { DataSource } from 'typeorm';
import type { TransactionalProducer } from '../../src'; // 'rocketmq-tx'
import type { ChaosContext } from '../../src/testing'; // 'rocketmq-tx/testing'
import { DEFAULT_DB_URL, migrate, openDatabase } from './database';
import { OrderService } from './orderService';

const run = Math.random().toString(36).slice(2, 8);

export function dataSource(): Promise<DataSource> {
  return openDatabase(process.env.ROCKETMQ_TX_DB_URL ?? DEFAULT_DB_URL, { poolSize: 6 });
}

export async function prepare(ds: DataSource): Promise<void> {
  await migrate(ds);
}

export async function transaction(
  producer: TransactionalProducer,
  { topic, sequence }: ChaosContext,
): Promise<unknown> {
  const service = new OrderService(producer, { txTopic: topic, eventsTopic: topic, tag: 'chaos' });
  return service.placeOrder({
    id: `chaos-${run}-${process.pid}-${sequence}`,
    // A few customers per process: their credit limit rejects some orders (a business rollback).
    customer: `c-${process.pid}-${sequence % 7}`,
    sku: 'sku-chaos',
    qty: 1 + (sequence % 5),
    channel: 'checkout',
  });
}
