import type { DataSource } from 'typeorm';
import { InvalidMessageError, TransactionalProducer, uuidv7, type CheckBackOutcome } from '../../src';
import { Collector } from '../helpers/collector';
import { TEST_DATABASE, ensureSchema, openDataSource, orderExists, sql, txRecord } from '../helpers/db';
import { ENDPOINTS, waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';

const TOPIC = 'rmqtx_tx_19';
const GROUP = 'it_lean';

/** A transaction that fails on purpose (its business work throws). */
class PlannedRollback extends Error {}

describe(`transport: 'lean' against the real broker and the database (${TEST_DATABASE})`, () => {
  let ds: DataSource;
  let collector: Collector;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    collector = await new Collector(TOPIC).start();
  });

  afterAll(async () => {
    await collector?.stop();
    await ds?.destroy();
  });

  it('commits and delivers exactly the committed transactions, none of the rolled back, spread over several queues', async () => {
    const producer = new TransactionalProducer({
      endpoints: ENDPOINTS,
      dataSource: ds,
      producerGroup: GROUP,
      topics: [TOPIC],
      startTimeoutMs: 30_000,
      transport: 'lean',
    });
    await producer.start();
    const run = uuidv7();
    const committed: string[] = [];
    const rolledBack: string[] = [];
    try {
      await Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          const id = `lean-${run}-${i}`;
          const rollback = i % 5 === 0;
          try {
            const out = await producer.transact(
              { topic: TOPIC, tag: 'lean', keys: [id], body: { id } },
              async (m) => {
                await m.query(sql('INSERT INTO test_order (id, note) VALUES (?, ?)'), [id, 'lean']);
                if (rollback) throw new PlannedRollback(id);
              },
            );
            committed.push(out.txId);
            expect(await txRecord(ds, out.txId)).toMatchObject({
              status: 'COMMITTED',
              resolved_by: 'PRODUCER',
            });
          } catch (err) {
            if (!(err instanceof PlannedRollback)) throw err;
            rolledBack.push(id);
            expect(await orderExists(ds, id)).toBe(false);
          }
        }),
      );
      expect(committed).toHaveLength(48);
      expect(rolledBack).toHaveLength(12);
      const mine = () => collector.received.filter((m) => m.body.includes(run));
      await waitFor(() => new Set(mine().map((m) => m.properties.TX_ID)).size === committed.length, {
        timeoutMs: 60_000,
        description: 'every committed transaction delivered',
      });
      // A marker committed after everything else: once it is in, a rolled-back one would be too.
      const marker = await producer.transact({ topic: TOPIC, body: { marker: run } }, async () => undefined);
      await waitFor(() => collector.withProperty('TX_ID', marker.txId).length > 0, {
        timeoutMs: 30_000,
        description: 'marker delivered',
      });
      const delivered = mine().filter((m) => !m.body.includes('marker'));
      expect(new Set(delivered.map((m) => m.properties.TX_ID))).toEqual(new Set(committed));
      for (const id of rolledBack) expect(delivered.some((m) => m.keys.includes(id))).toBe(false);
      expect(delivered.every((m) => m.tag === 'lean' && m.properties.TX_ORIGIN === GROUP)).toBe(true);
      // The official client writes queue 0 only (rocketmq-clients #1093); the lean path rotates.
      const queues = new Set(delivered.map((m) => m.queueId));
      expect(queues.has(undefined)).toBe(false);
      expect(queues.size).toBeGreaterThan(1);
      // Broker confirmations are recorded for lean commits as for official ones.
      await waitFor(async () => (await txRecord(ds, committed[0]!))?.confirmed_at != null, {
        timeoutMs: 10_000,
        description: 'broker confirmation recorded',
      });
    } finally {
      await producer.shutdown();
    }
  });

  it('check-backs still resolve through the official client when EndTransaction never arrives', async () => {
    const answers: CheckBackOutcome[] = [];
    const producer = makeProducer(
      ds,
      {
        topics: [TOPIC],
        producerGroup: GROUP,
        transport: 'lean',
        checkBack: { onResolved: (o) => answers.push(o) },
      },
      // Every EndTransaction is dropped: only the broker's check-back can decide.
      { beforeEnd: async () => false },
    );
    await producer.start();
    try {
      const run = uuidv7();
      const committed = await producer.transact(
        { topic: TOPIC, keys: [`cb-commit-${run}`], body: { run, what: 'commit' } },
        async (m) => {
          await m.query(sql('INSERT INTO test_order (id) VALUES (?)'), [`cb-commit-${run}`]);
        },
      );
      let rolledBackTxId: string | undefined;
      await producer
        .transact(
          { topic: TOPIC, keys: [`cb-rollback-${run}`], body: { run, what: 'rollback' } },
          async (_m, ctx) => {
            rolledBackTxId = ctx.txId;
            throw new PlannedRollback('no');
          },
        )
        .catch((e: unknown) => {
          if (!(e instanceof PlannedRollback)) throw e;
        });
      await waitFor(() => collector.withProperty('TX_ID', committed.txId).length > 0, {
        timeoutMs: 60_000,
        description: 'the committed transaction delivered by check-back',
      });
      await waitFor(() => answers.some((a) => a.txId === rolledBackTxId), {
        timeoutMs: 60_000,
        description: 'the rolled-back transaction answered by check-back',
      });
      expect(answers.find((a) => a.txId === committed.txId)?.resolution).toBe('COMMIT');
      expect(answers.find((a) => a.txId === rolledBackTxId)?.resolution).toBe('ROLLBACK');
      // A later commit goes through (EndTransaction dropped again, so via check-back) after the
      // rollback's answer: if the rolled-back one were delivered it would be in by now.
      const marker = await producer.transact(
        { topic: TOPIC, body: { run, what: 'marker' } },
        async () => undefined,
      );
      await waitFor(() => collector.withProperty('TX_ID', marker.txId).length > 0, {
        timeoutMs: 60_000,
        description: 'marker delivered by check-back',
      });
      expect(collector.withProperty('TX_ID', rolledBackTxId!)).toEqual([]);
    } finally {
      await producer.shutdown();
    }
  });

  it('refuses a topic of the wrong message type with the same typed error as the official path', async () => {
    const producer = makeProducer(ds, {
      topics: ['rmqtx_normal_5'],
      producerGroup: GROUP,
      transport: 'lean',
    });
    await producer.start();
    try {
      const work = jest.fn(async () => undefined);
      const err = await producer
        .transact({ topic: 'rmqtx_normal_5', body: 'x' }, work)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidMessageError);
      expect((err as InvalidMessageError).path).toBe('message.topic');
      expect(work).not.toHaveBeenCalled();
    } finally {
      await producer.shutdown();
    }
  });
});
