/**
 * The inventory service: an IdempotentConsumer that reserves stock for each OrderPlaced event.
 * The consumed_event row, the reservation and the stock update commit in one transaction, so a
 * redelivered event (same eventId) is acked without reserving twice.
 */
import type { DataSource } from 'typeorm';
import { IdempotentConsumer, on, type ConsumeOutcome, type Logger, type Subscription } from '../../src'; // 'rocketmq-tx'
import { OrderPlaced } from './contract';
import { Reservation, Stock } from './entities';

export interface InventoryConsumerOptions {
  endpoints: string;
  dataSource: DataSource;
  consumerGroup: string;
  subscriptions: Subscription[];
  onOutcome?: (outcome: ConsumeOutcome) => void;
  logger?: Logger;
}

export const reserveStock = on(OrderPlaced, async (event, { manager }) => {
  const { orderId, sku, qty } = event.data;
  const result = await manager
    .createQueryBuilder()
    .update(Stock)
    .set({ available: () => 'available - :qty', reserved: () => 'reserved + :qty' })
    .where('sku = :sku AND available >= :qty', { sku, qty })
    .execute();
  const status = result.affected === 1 ? 'RESERVED' : 'OUT_OF_STOCK';
  await manager.insert(Reservation, { orderId, sku, qty, status, eventId: event.eventId });
});

export function createInventoryConsumer(options: InventoryConsumerOptions): IdempotentConsumer {
  return new IdempotentConsumer({
    endpoints: options.endpoints,
    dataSource: options.dataSource,
    consumerGroup: options.consumerGroup,
    subscriptions: options.subscriptions,
    handlers: [reserveStock],
    concurrency: 8,
    retry: { initialDelayMs: 500, maxDelayMs: 5000 },
    startTimeoutMs: 30_000,
    ...(options.onOutcome ? { onOutcome: options.onOutcome } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
  });
}
