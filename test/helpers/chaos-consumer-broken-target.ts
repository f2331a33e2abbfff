/**
 * A consumer target that is NOT idempotent on purpose (the negative control of the consumer
 * crash-window runner): its handler writes its effect through the DataSource, outside the
 * consumer's transaction, so a process killed inside the handler leaves the effect committed
 * and the dedupe row not; the redelivery applies the event a second time.
 */
import type { DataSource } from 'typeorm';
import { on, type IdempotentConsumerOptions, type TransactEvent } from '../../src';
import { OrderPlaced } from '../../samples/order-service/contract';
import { DEFAULT_DB_URL, migrate, openDatabase, run, select } from '../../samples/order-service/database';

let shared: DataSource | undefined;
const id = Math.random().toString(36).slice(2, 8);

export async function dataSource(): Promise<DataSource> {
  shared = await openDatabase(process.env.ROCKETMQ_TX_DB_URL ?? DEFAULT_DB_URL, { poolSize: 4 });
  return shared;
}

export async function prepare(ds: DataSource): Promise<void> {
  await migrate(ds);
  await run(ds, 'CREATE TABLE IF NOT EXISTS chaos_broken_effect (event_id VARCHAR(36) NOT NULL)');
}

export function consumerOptions(): Omit<
  IdempotentConsumerOptions,
  'endpoints' | 'dataSource' | 'consumerGroup' | 'subscriptions'
> {
  return {
    handlers: [
      on(OrderPlaced, async (event) => {
        // Wrong on purpose: not through the handler's manager.
        await run(shared!, 'INSERT INTO chaos_broken_effect (event_id) VALUES (?)', [event.eventId]);
      }),
    ],
    // One at a time: each handler holds a pooled connection (its transaction) and takes another.
    concurrency: 1,
    invisibleDurationMs: 10_000,
    startTimeoutMs: 30_000,
  };
}

export function event(n: number, topic: string): TransactEvent {
  const orderId = `chaos-broken-${id}-${n}`;
  return {
    topic,
    event: OrderPlaced.create({
      aggregateId: orderId,
      aggregateVersion: 1,
      data: { orderId, customer: 'c-broken', sku: 'sku-broken', qty: 1, channel: 'checkout' },
    }),
  };
}

export async function effects(ds: DataSource, eventIds: readonly string[]): Promise<Map<string, number>> {
  const rows = await select<{ event_id: string; n: unknown }>(
    ds,
    `SELECT event_id, COUNT(*) AS n FROM chaos_broken_effect WHERE event_id IN (${eventIds.map(() => '?').join(', ')}) GROUP BY event_id`,
    [...eventIds],
  );
  return new Map(rows.map((r) => [r.event_id, Number(r.n)]));
}
