/**
 * The inventory service as a target of the consumer crash-window runner:
 *   npx rocketmq-tx chaos --consumer --module samples/order-service/chaos-consumer-target.ts --topic <TRANSACTION topic>
 * The runner publishes OrderPlaced events (event(n)); every process it kills runs the real
 * inventory handler (reserveStock: a stock UPDATE and a reservation row in the consumer's
 * transaction); effects() counts the reservation rows of each event.
 */
import type { DataSource } from 'typeorm';
import type { IdempotentConsumerOptions, TransactEvent } from '../../src'; // 'rocketmq-tx'
import { OrderPlaced } from './contract';
import { DEFAULT_DB_URL, migrate, openDatabase, select } from './database';
import { reserveStock } from './inventory';

/** One SKU for every run, stocked so that no reservation runs short. */
export const CHAOS_SKU = 'sku-chaos-consumer';
const run = Math.random().toString(36).slice(2, 8);

export function dataSource(): Promise<DataSource> {
  return openDatabase(process.env.ROCKETMQ_TX_DB_URL ?? DEFAULT_DB_URL, { poolSize: 6 });
}

export async function prepare(ds: DataSource): Promise<void> {
  await migrate(ds);
  const [row] = await select<{ n: unknown }>(ds, 'SELECT COUNT(*) AS n FROM inventory_stock WHERE sku = ?', [
    CHAOS_SKU,
  ]);
  if (Number(row?.n) === 0) {
    await select(ds, 'INSERT INTO inventory_stock (sku, available, reserved) VALUES (?, ?, 0)', [
      CHAOS_SKU,
      1_000_000_000,
    ]);
  }
}

export function consumerOptions(): Omit<
  IdempotentConsumerOptions,
  'endpoints' | 'dataSource' | 'consumerGroup' | 'subscriptions'
> {
  return {
    handlers: [reserveStock],
    concurrency: 4,
    // The shortest the SDK allows: a message a killed process held comes back after 10 s.
    invisibleDurationMs: 10_000,
    retry: { initialDelayMs: 500, maxDelayMs: 5000 },
    startTimeoutMs: 30_000,
  };
}

export function event(n: number, topic: string): TransactEvent {
  const orderId = `chaos-c-${run}-${n}`;
  return {
    topic,
    event: OrderPlaced.create({
      aggregateId: orderId,
      aggregateVersion: 1,
      data: { orderId, customer: 'c-chaos', sku: CHAOS_SKU, qty: 1 + (n % 3), channel: 'checkout' },
    }),
  };
}

export async function effects(ds: DataSource, eventIds: readonly string[]): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (let i = 0; i < eventIds.length; i += 500) {
    const chunk = eventIds.slice(i, i + 500);
    const rows = await select<{ event_id: string; n: unknown }>(
      ds,
      `SELECT event_id, COUNT(*) AS n FROM inventory_reservation WHERE event_id IN (${chunk.map(() => '?').join(', ')}) GROUP BY event_id`,
      chunk,
    );
    for (const r of rows) counts.set(r.event_id, Number(r.n));
  }
  return counts;
}
