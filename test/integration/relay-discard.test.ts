import type { DataSource } from 'typeorm';
import { TransactionResolution, TransactionalProducer, type CheckBackMessage } from '../../src';
import { RocketMqGateway } from '../../src/broker/RocketMqGateway';
import { Collector } from '../helpers/collector';
import { ensureSchema, openDataSource, sql, txRecord } from '../helpers/db';
import { ENDPOINTS, waitFor } from '../helpers/env';
import { makeRelay, outboxRow } from '../helpers/relay';

const TOPIC = 'rmqtx_tx_10';
const GROUP = 'it_relay_discard';
// Test broker: transactionTimeOut 1 s, check interval 2 s, check max 5: it gives up after ~12 s.
const HORIZON_MS = 15_000;

describe('discard reconciliation against the real broker and MariaDB', () => {
  let ds: DataSource;
  let collector: Collector;
  let producer: TransactionalProducer;
  const asked: string[] = [];

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    collector = await new Collector(TOPIC).start();
    producer = new TransactionalProducer(
      {
        endpoints: ENDPOINTS,
        dataSource: ds,
        producerGroup: GROUP,
        topics: [TOPIC],
        startTimeoutMs: 30_000,
        // This test proves the relay's reconciliation: the producer's own recovery stays out of it.
        discardRecovery: false,
        // Every check-back answered UNKNOWN: the broker keeps asking until its check max, then discards.
        checkBack: {
          resolverScope: 'all',
          resolver: {
            resolve: async (m: CheckBackMessage) => {
              if (m.txId) asked.push(m.txId);
              return TransactionResolution.UNKNOWN;
            },
          },
        },
      },
      {
        gateway: (config, logger) => {
          const real = new RocketMqGateway(config, logger);
          return {
            start: () => real.start(),
            send: (m) => real.send(m),
            sendHalf: (m) => real.sendHalf(m),
            shutdown: () => real.shutdown(),
            // The EndTransaction is lost (never acknowledged, so never confirmed).
            endTransaction: () => Promise.reject(new Error('EndTransaction dropped by the test')),
          };
        },
      },
    );
    await producer.start();
  });

  afterAll(async () => {
    await producer?.shutdown();
    await collector?.stop();
    await ds?.destroy();
  });

  it('a committed event whose half message the broker discards after its check max is republished once with the same eventId', async () => {
    const r = await producer.transact({ topic: TOPIC, body: { discarded: true } }, async (m, c) => {
      await m.query(sql('INSERT INTO test_order (id) VALUES (?)'), [c.txId]);
    });
    const eventId = r.eventIds[0]!;
    expect((await txRecord(ds, r.txId))?.status).toBe('COMMITTED');
    expect((await outboxRow(ds, eventId))?.status).toBe('IN_FLIGHT');
    await waitFor(() => asked.includes(r.txId), { description: 'the broker checks back (answered UNKNOWN)' });

    // The relay declares the topic, so it gets checks too: it answers them UNKNOWN here (as if it
    // could not read tx_record), so that the broker really discards the half message.
    const { relay } = makeRelay(
      ds,
      {
        topics: [TOPIC],
        transactionTopics: [TOPIC],
        discardHorizonMs: HORIZON_MS,
        reconcileIntervalMs: 500,
      },
      { checkBackUnknown: true },
    );
    await relay.start();
    try {
      await waitFor(async () => (await outboxRow(ds, eventId))?.status === 'SENT', {
        timeoutMs: 60_000,
        description: 'discarded event republished and SENT',
      });
      expect(relay.stats.republished).toBeGreaterThanOrEqual(1);
      await waitFor(() => collector.withProperty('EVENT_ID', eventId).length >= 1, {
        description: 'consumer receives the republished event',
      });
      // A marker sent after it: once it arrives, anything else for eventId would have too.
      const marker = await producer.transact({ topic: TOPIC, body: 'marker' }, async () => undefined, {
        delivery: 'outbox',
      });
      await waitFor(() => collector.withProperty('EVENT_ID', marker.eventIds[0]!).length >= 1, {
        description: 'marker delivered',
      });
      const got = collector.withProperty('EVENT_ID', eventId);
      expect(got).toHaveLength(1);
      expect(got[0]!.properties.TX_ID).toBe(r.txId);
      expect(got[0]!.body).toBe('{"discarded":true}');
    } finally {
      await relay.shutdown();
    }
  });
});
