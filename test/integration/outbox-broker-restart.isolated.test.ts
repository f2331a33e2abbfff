/**
 * Stops and restarts the broker: run this file on its own (it disturbs every other file's broker
 * traffic), e.g. `npx jest test/integration/outbox-broker-restart.isolated.test.ts --selectProjects isolated` (npm test runs it alone, after the rest).
 */
import type { DataSource } from 'typeorm';
import * as rocketmq from '../../scripts/rocketmq';
import { TransactionalProducer } from '../../src';
import { Collector } from '../helpers/collector';
import { ensureSchema, openDataSource } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';
import { countByStatus, makeRelay } from '../helpers/relay';

const TOPIC = 'rmqtx_normal_1';
const LOAD = 60;

describe('outbox delivery across a broker outage', () => {
  let ds: DataSource;
  let producer: TransactionalProducer;
  let brokerDown = false;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    producer = makeProducer(ds, { topics: [TOPIC], producerGroup: 'it_outbox_restart', delivery: 'outbox' });
    await producer.start();
  });

  afterAll(async () => {
    if (brokerDown) await rocketmq.start({ quiet: true });
    await producer?.shutdown();
    await ds?.destroy();
  });

  it('transactions committed while the broker is stopped are all delivered after it restarts, 0 lost', async () => {
    const { relay } = makeRelay(ds, {
      topics: [TOPIC],
      requestTimeoutMs: 1000,
      backoff: { baseMs: 200, maxDelayMs: 2000, jitterMs: 200 },
      maxAttempts: 1000,
    });
    await relay.start();
    const ids: string[] = [];
    try {
      brokerDown = true;
      await rocketmq.stop({ quiet: true, components: ['proxy'] });
      await Promise.all(
        Array.from({ length: LOAD }, async (_, i) => {
          const r = await producer.transact({ topic: TOPIC, body: { outage: i } }, async (m, c) => {
            await m.query('INSERT INTO test_order (id) VALUES (?)', [c.txId]);
          });
          ids.push(...r.eventIds);
        }),
      );
      expect(ids).toHaveLength(LOAD);
      await waitFor(() => relay.stats.failed > 0, {
        description: 'relay sends fail while the broker is down',
      });
      expect(await countByStatus(ds, ids, 'SENT')).toBe(0);
      await rocketmq.start({ quiet: true });
      brokerDown = false;
      // Right after a restart grpc-js may still be in its reconnect backoff (its subchannel pool is
      // shared by every client of the process): retry the consumer start until the proxy answers.
      let collector: Collector | undefined;
      await waitFor(
        async () => {
          collector = await new Collector(TOPIC).start().catch(() => undefined);
          return collector !== undefined;
        },
        { timeoutMs: 90_000, intervalMs: 1000, description: 'a consumer started after the broker restart' },
      );
      if (!collector) throw new Error('unreachable: waitFor returned without a collector');
      try {
        await waitFor(async () => (await countByStatus(ds, ids, 'SENT')) === LOAD, {
          timeoutMs: 90_000,
          description: 'every outbox row SENT after the restart',
        });
        expect(await countByStatus(ds, ids, 'DEAD')).toBe(0);
        // A new group reads the topic from its oldest in-memory message: every event arrives.
        await waitFor(() => ids.every((id) => collector!.withProperty('EVENT_ID', id).length >= 1), {
          timeoutMs: 60_000,
          description: `all ${LOAD} events received`,
        });
      } finally {
        await collector.stop();
      }
    } finally {
      await relay.shutdown();
    }
  });
});
