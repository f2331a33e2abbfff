/**
 * Stops and restarts the proxy under a producer on the lean transport: run this file on its own
 * (it disturbs every other file's broker traffic), e.g.
 * `npx jest test/integration/lean-broker-restart.isolated.test.ts --selectProjects isolated`.
 */
import type { DataSource } from 'typeorm';
import * as rocketmq from '../../scripts/rocketmq';
import { BrokerUnavailableError, TransactionalProducer, uuidv7 } from '../../src';
import { Collector } from '../helpers/collector';
import { ensureSchema, openDataSource, orderExists, txRecord } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';

const TOPIC = 'rmqtx_tx_19';

describe("transport: 'lean' across a proxy restart", () => {
  let ds: DataSource;
  let producer: TransactionalProducer;
  let brokerDown = false;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    producer = makeProducer(ds, {
      producerGroup: 'it_lean_restart',
      topics: [TOPIC],
      requestTimeoutMs: 2000,
      transport: 'lean',
    });
    await producer.start();
  });

  afterAll(async () => {
    if (brokerDown) await rocketmq.start({ quiet: true });
    await producer?.shutdown();
    await ds?.destroy();
  });

  const order = (id: string) =>
    producer.transact({ topic: TOPIC, keys: [id], body: { id } }, async (m) => {
      await m.query('INSERT INTO test_order (id) VALUES (?)', [id]);
    });

  it('fails typed and retriable while the proxy is down, commits nothing, and reconnects after it is back', async () => {
    await order(`before-${uuidv7()}`);

    brokerDown = true;
    await rocketmq.stop({ quiet: true, components: ['proxy'] });
    const down = `down-${uuidv7()}`;
    const err = await order(down).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokerUnavailableError);
    expect((err as BrokerUnavailableError).retriable).toBe(true);
    expect(await orderExists(ds, down)).toBe(false);

    await rocketmq.start({ quiet: true });
    brokerDown = false;
    // The same producer, not a new one: its lean connection must come back by itself.
    let after: { txId: string } | undefined;
    const afterId = `after-${uuidv7()}`;
    await waitFor(
      async () => {
        after = await order(afterId).catch(() => undefined);
        return after !== undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500, description: 'a lean transaction committed after the restart' },
    );
    expect(await txRecord(ds, after!.txId)).toMatchObject({ status: 'COMMITTED' });

    // Right after a restart grpc-js may still be in its reconnect backoff: retry the consumer.
    let collector: Collector | undefined;
    await waitFor(
      async () => {
        collector = await new Collector(TOPIC).start().catch(() => undefined);
        return collector !== undefined;
      },
      { timeoutMs: 90_000, intervalMs: 1000, description: 'a consumer started after the restart' },
    );
    try {
      const later = await order(`later-${uuidv7()}`);
      await waitFor(() => collector!.withProperty('TX_ID', later.txId).length > 0, {
        timeoutMs: 60_000,
        description: 'a transaction committed after the restart delivered',
      });
    } finally {
      await collector!.stop();
    }
  });
});
