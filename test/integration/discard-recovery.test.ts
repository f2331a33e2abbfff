import type { DataSource } from 'typeorm';
import {
  collectStatus,
  TransactionResolution,
  type CheckBackMessage,
  type TransactionalProducer,
} from '../../src';
import { Collector } from '../helpers/collector';
import { ensureSchema, openDataSource, sql, txRecord } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';
import { outboxRow } from '../helpers/relay';

const TOPIC = 'rmqtx_tx_23';
const GROUP = 'it_discard_recovery';
// Test broker: transactionTimeOut 1 s, check interval 2 s, check max 5: it gives up after ~12 s.
const HORIZON_MS = 15_000;

describe("the producer's built-in discard recovery, against the real broker and MariaDB (no relay)", () => {
  let ds: DataSource;
  let collector: Collector;
  let producer: TransactionalProducer;
  const asked: string[] = [];
  /** Half messages of transact() whose EndTransaction the test drops (as if the process had died). */
  const dropEnd = new Set<string>();
  let dropping = true;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    collector = await new Collector(TOPIC).start();
    producer = makeProducer(
      ds,
      {
        topics: [TOPIC],
        producerGroup: GROUP,
        discardRecovery: { horizonMs: HORIZON_MS, intervalMs: 500 },
        // Every check-back answered UNKNOWN (as if each went to a dead instance): the broker keeps
        // asking until its check max, then discards the half message.
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
        afterHalf: async (half) => {
          if (dropping) dropEnd.add(half.messageId);
        },
        // Rejected, not skipped: an unacknowledged EndTransaction is never confirmed.
        beforeEnd: async (half) => {
          if (dropEnd.has(half.messageId)) throw new Error('EndTransaction dropped by the test');
          return true;
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

  it('a committed event the broker discards after its check max is republished once, same eventId, and marked SENT', async () => {
    // The topic's rows left by other suites in this database (the cluster suite shares it) are
    // not this test's: its status check below compares with them.
    const leftOver = (await collectStatus(ds, { topics: [TOPIC] })).inDoubt.byState.republishing.events;
    const r = await producer.transact(
      [
        { topic: TOPIC, body: { discarded: 1 } },
        { topic: TOPIC, body: { discarded: 2 } },
      ],
      async (m, c) => {
        await m.query(sql('INSERT INTO test_order (id) VALUES (?)'), [c.txId]);
      },
    );
    dropping = false;
    expect((await txRecord(ds, r.txId))?.status).toBe('COMMITTED');
    for (const id of r.eventIds) expect((await outboxRow(ds, id))?.status).toBe('IN_FLIGHT');
    // Fresh, within the horizon: the events wait for the broker; the status says so (no action needed).
    const early = await collectStatus(ds, { topics: [TOPIC], discardHorizonMs: 600_000 });
    expect(early.inDoubt.byState.awaitingBroker.events).toBeGreaterThanOrEqual(2);
    await waitFor(() => asked.includes(r.txId), { description: 'the broker checks back (answered UNKNOWN)' });
    // Past a 1 s horizon they become overdue (or republishing, once the 15 s recovery takes them).
    await waitFor(
      async () => {
        const st = (await collectStatus(ds, { topics: [TOPIC], discardHorizonMs: 1000 })).inDoubt.byState;
        return st.overdue.events + st.republishing.events >= 2;
      },
      { timeoutMs: 20_000, description: 'the unconfirmed events reported overdue past a 1 s horizon' },
    );

    for (const id of r.eventIds) {
      await waitFor(async () => (await outboxRow(ds, id))?.status === 'SENT', {
        timeoutMs: 60_000,
        description: `discarded event ${id} republished by the producer and SENT`,
      });
    }
    expect(producer.stats.discardRecovery?.republished).toBeGreaterThanOrEqual(2);
    // A marker sent after them: once it arrives, anything else for these events would have too.
    const marker = await producer.transact({ topic: TOPIC, body: 'marker' }, async () => undefined);
    await waitFor(() => collector.withProperty('EVENT_ID', marker.eventIds[0]!).length >= 1, {
      description: 'marker delivered',
    });
    for (const [i, id] of r.eventIds.entries()) {
      const got = collector.withProperty('EVENT_ID', id);
      expect(got).toHaveLength(1);
      expect(got[0]!.properties.TX_ID).toBe(r.txId);
      expect(got[0]!.body).toBe(`{"discarded":${i + 1}}`);
    }
    const after = await collectStatus(ds, { topics: [TOPIC] });
    expect(after.inDoubt.byState.republishing.events).toBeLessThanOrEqual(leftOver);
  }, 120_000);
});
