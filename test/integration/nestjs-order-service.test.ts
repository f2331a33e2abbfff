/**
 * samples/nestjs-order-service started for real (Nest HTTP server on 127.0.0.1, the real broker
 * and database): orders in over HTTP, OrderPlaced events out through publish() inside
 * @Transactional(), applied by the app's @RocketMqTxHandler() consumer. Every committed order's
 * event is applied exactly once; a rejected (rolled-back) order's event never is.
 */
import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { IdempotentConsumer, ProducerNotRunningError, TransactionalProducer, uuidv7 } from '../../src';
import { OrderAppliedEntity, OrderEntity, createOrderService } from '../../samples/nestjs-order-service/app';
import { ensureSchema, openDataSource } from '../helpers/db';
import { DB_URL, ENDPOINTS, waitFor } from '../helpers/env';

const TOPIC = 'rmqtx_tx_nest_0';
const GOOD = 6;
const REJECTED = 2;

describe('samples/nestjs-order-service against the real broker and database', () => {
  let app: INestApplication;
  let base: string;
  let closed = false;
  const run = uuidv7().slice(-12);

  beforeAll(async () => {
    const helper = await openDataSource({ poolSize: 2 });
    try {
      await ensureSchema(helper);
    } finally {
      await helper.destroy();
    }
    app = await createOrderService({
      endpoints: ENDPOINTS,
      dbUrl: DB_URL,
      topic: TOPIC,
      producerGroup: 'it_nest_orders',
      consumerGroup: 'it_nest_fulfilment',
    });
    await app.listen(0, '127.0.0.1');
    const address = app.getHttpServer().address() as { port: number };
    base = `http://127.0.0.1:${address.port}`;
  }, 120_000);

  afterAll(async () => {
    if (!closed) await app?.close();
  }, 60_000);

  const post = (body: unknown) =>
    fetch(`${base}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('applies every committed order once and never a rolled-back one, then drains on close', async () => {
    const rejected = Array.from({ length: REJECTED }, (_, i) => `o-${run}-bad-${i}`);
    const good = Array.from({ length: GOOD }, (_, i) => `o-${run}-ok-${i}`);
    // The rejected orders first: had their events been delivered, they would arrive first.
    for (const id of rejected) {
      const res = await post({ id, sku: 'A', qty: 500 });
      expect(res.status).toBe(422);
    }
    const responses = await Promise.all(good.map((id, i) => post({ id, sku: 'A', qty: i + 1 })));
    expect(responses.map((r) => r.status)).toEqual(good.map(() => 201));
    const bodies = (await Promise.all(responses.map((r) => r.json()))) as Array<{
      orderId: string;
      txId: string;
    }>;
    expect(bodies.map((b) => b.orderId)).toEqual(good);

    const ds = app.get(DataSource);
    const appliedFor = async (ids: string[]) =>
      (await ds.getRepository(OrderAppliedEntity).find()).filter((r) => ids.includes(r.orderId));
    await waitFor(async () => (await appliedFor(good)).length >= GOOD, {
      timeoutMs: 60_000,
      description: `${GOOD} OrderPlaced events applied`,
    });
    const applied = await appliedFor([...good, ...rejected]);
    expect(applied.map((r) => r.orderId).sort()).toEqual([...good].sort());
    expect(applied.map((r) => [r.orderId, r.qty]).sort()).toEqual(good.map((id, i) => [id, i + 1]).sort());
    // the rejected orders rolled back: no row, no event
    const orders = (await ds.getRepository(OrderEntity).find()).filter((o) => o.id.startsWith(`o-${run}-`));
    expect(orders.map((o) => o.id).sort()).toEqual([...good].sort());
    const consumer = app.get(IdempotentConsumer);
    expect(consumer.stats.applied).toBeGreaterThanOrEqual(GOOD);
    const producer = app.get(TransactionalProducer);

    await app.close();
    closed = true;
    // drained before the DataSource closed: the producer refuses new work, the DataSource is gone
    await expect(producer.publish(ds.manager, { topic: TOPIC, body: 'late' })).rejects.toThrow(
      ProducerNotRunningError,
    );
    expect(ds.isInitialized).toBe(false);
  }, 120_000);
});
