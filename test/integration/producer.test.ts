import type { DataSource } from 'typeorm';
import {
  type CheckBackOutcome,
  InvalidMessageError,
  TransactionFencedError,
  TransactionalProducer,
  BrokerUnavailableError,
  uuidv7,
} from '../../src';
import { Collector } from '../helpers/collector';
import {
  countTxRecords,
  ensureSchema,
  lockWaitingStatements,
  openDataSource,
  orderExists,
  sql,
  txRecord,
} from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';

const TOPIC = 'rmqtx_tx_1';
const GROUP = 'it_producer';

describe('TransactionalProducer against the real broker and MariaDB', () => {
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

  async function blockedFenceInserts(txId: string): Promise<number> {
    return lockWaitingStatements(ds, 'INSERT INTO tx_record', `INSERT INTO tx_record %${txId}%`);
  }

  /** Commits a marker transaction and waits for it: anything sent before it has had its chance. */
  async function flushWith(producer: TransactionalProducer): Promise<void> {
    const id = `marker-${uuidv7()}`;
    const { txId } = await producer.transact({ topic: TOPIC, body: { marker: id } }, async (m) => {
      await m.query(sql('INSERT INTO test_order (id) VALUES (?)'), [id]);
    });
    await waitFor(() => collector.withProperty('TX_ID', txId).length > 0, {
      timeoutMs: 30_000,
      description: `marker ${txId} delivered`,
    });
  }

  describe('plain producer', () => {
    let producer: TransactionalProducer;
    beforeAll(async () => {
      producer = makeProducer(ds, { topics: [TOPIC], producerGroup: GROUP });
      await producer.start();
    });
    afterAll(async () => {
      await producer?.shutdown();
    });

    it('commit: business row and tx_record committed, message delivered once', async () => {
      const id = `order-${uuidv7()}`;
      const out = await producer.transact(
        { topic: TOPIC, tag: 'created', keys: [id], body: { orderId: id, total: 42 } },
        async (manager) => {
          await manager.query(sql('INSERT INTO test_order (id, note) VALUES (?, ?)'), [id, 'commit']);
          return id;
        },
      );
      expect(out.result).toBe(id);
      expect(await orderExists(ds, id)).toBe(true);
      expect(await txRecord(ds, out.txId)).toMatchObject({ status: 'COMMITTED', resolved_by: 'PRODUCER' });
      await waitFor(() => collector.withProperty('TX_ID', out.txId).length > 0, {
        timeoutMs: 30_000,
        description: 'committed message delivered',
      });
      const [got] = collector.withProperty('TX_ID', out.txId);
      expect(JSON.parse(got!.body)).toEqual({ orderId: id, total: 42 });
      expect(got!.tag).toBe('created');
      expect(got!.keys).toEqual(expect.arrayContaining([out.eventIds[0], id]));
      expect(got!.properties).toMatchObject({ TX_ORIGIN: GROUP, EVENT_ID: out.eventIds[0] });
      await flushWith(producer);
      expect(collector.withProperty('TX_ID', out.txId)).toHaveLength(1);
      await waitFor(async () => (await txRecord(ds, out.txId))?.confirmed_at != null, {
        timeoutMs: 5_000,
        description: 'broker confirmation recorded',
      });
    });

    it('several events in one transaction: one txId, one tx_record row, every event delivered', async () => {
      const out = await producer.transact(
        [
          { topic: TOPIC, body: 'first' },
          { topic: TOPIC, body: 'second' },
          { topic: TOPIC, body: 'third' },
        ],
        async () => 'ok',
      );
      await waitFor(() => collector.withProperty('TX_ID', out.txId).length === 3, {
        timeoutMs: 30_000,
        description: 'three events delivered',
      });
      expect(
        collector
          .withProperty('TX_ID', out.txId)
          .map((m) => m.properties.EVENT_ID)
          .sort(),
      ).toEqual([...out.eventIds].sort());
      const rows = await ds.query(sql('SELECT event_count FROM tx_record WHERE tx_id = ?'), [out.txId]);
      expect(rows).toEqual([{ event_count: 3 }]);
    });

    it('work throws: business row absent, message never delivered, the same error object rethrown', async () => {
      const id = `order-${uuidv7()}`;
      const boom = new Error('payment declined');
      let txIdSeen: string | undefined;
      const err = await producer
        .transact({ topic: TOPIC, body: { orderId: id } }, async (manager, { txId }) => {
          await manager.query(sql('INSERT INTO test_order (id) VALUES (?)'), [id]);
          txIdSeen = txId;
          throw boom;
        })
        .catch((e: unknown) => e);
      expect(err).toBe(boom);
      expect(await orderExists(ds, id)).toBe(false);
      await flushWith(producer);
      expect(collector.received.filter((m) => m.body.includes(id))).toEqual([]);
      expect(txIdSeen).toBeDefined();
      expect(await txRecord(ds, txIdSeen!)).toBeUndefined();
    });

    it('an eventId published twice: the second transact is refused, its business change rolled back', async () => {
      const eventId = uuidv7();
      await producer.transact({ topic: TOPIC, body: 'once', eventId }, async () => undefined);
      const id = `order-${uuidv7()}`;
      const err = await producer
        .transact({ topic: TOPIC, body: 'twice', eventId }, async (m) => {
          await m.query(sql('INSERT INTO test_order (id) VALUES (?)'), [id]);
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidMessageError);
      expect((err as InvalidMessageError).path).toBe('events');
      expect((err as Error).message).toContain(eventId);
      expect(await orderExists(ds, id)).toBe(false);
    });

    it('bad messages: typed errors, nothing written to the database', async () => {
      // This group's rows only: suites running alongside write rows of their own (the work never
      // runs, so it cannot write the business table).
      const before = await countTxRecords(ds, GROUP);
      const work = jest.fn(async () => undefined);
      await expect(producer.transact({ topic: '', body: 'x' }, work)).rejects.toBeInstanceOf(
        InvalidMessageError,
      );
      await expect(producer.transact({ topic: 'rmqtx_tx_11', body: 'x' }, work)).rejects.toThrow(
        /event\.topic: got "rmqtx_tx_11"; expected one of the producer's declared topics/,
      );
      await expect(
        producer.transact({ topic: TOPIC, body: Buffer.alloc(4 * 1024 * 1024 + 1) }, work),
      ).rejects.toThrow(/event\.body: got Buffer of 4194305 bytes; expected a body of at most 4194304 bytes/);
      expect(work).not.toHaveBeenCalled();
      expect(await countTxRecords(ds, GROUP)).toBe(before);
    });
  });

  it('a topic of the wrong message type is refused with InvalidMessageError before the database is touched', async () => {
    const producer = makeProducer(ds, { topics: ['rmqtx_normal_5'], producerGroup: GROUP });
    await producer.start();
    try {
      const before = await countTxRecords(ds, GROUP);
      const work = jest.fn(async () => undefined);
      const err = await producer
        .transact({ topic: 'rmqtx_normal_5', body: 'x' }, work)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidMessageError);
      expect((err as InvalidMessageError).path).toBe('message.topic');
      expect(work).not.toHaveBeenCalled();
      expect(await countTxRecords(ds, GROUP)).toBe(before);
    } finally {
      await producer.shutdown();
    }
  });

  it('a topic that does not exist on the broker: start() fails with a typed error naming it', async () => {
    const producer = makeProducer(ds, {
      topics: ['rmqtx_no_such_topic'],
      producerGroup: GROUP,
      startTimeoutMs: 20_000,
    });
    const err = await producer.start().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokerUnavailableError);
    expect(String((err as Error).message)).toMatch(/rmqtx_no_such_topic|not exist|NOT_FOUND|route/i);
    await producer.shutdown();
  });

  it('check-back arriving while the local transaction is still open waits, then answers COMMIT', async () => {
    const answers: CheckBackOutcome[] = [];
    // EndTransaction is dropped, so only the check-back can deliver this message.
    const producer = makeProducer(
      ds,
      {
        topics: [TOPIC],
        producerGroup: GROUP,
        checkBack: { lockWaitTimeoutMs: 5000, onResolved: (o) => answers.push(o) },
      },
      { beforeEnd: async () => false },
    );
    await producer.start();
    try {
      const id = `order-${uuidv7()}`;
      const out = await producer.transact(
        { topic: TOPIC, body: { orderId: id } },
        async (manager, { txId }) => {
          await manager.query(sql('INSERT INTO test_order (id) VALUES (?)'), [id]);
          // Hold the transaction open until the broker's check-back INSERT waits on our tx_record row.
          await waitFor(async () => (await blockedFenceInserts(txId)) > 0, {
            timeoutMs: 30_000,
            description: 'a broker check-back blocked on the open transaction',
          });
          return id;
        },
      );
      await waitFor(() => collector.withProperty('TX_ID', out.txId).length > 0, {
        timeoutMs: 30_000,
        description: 'message delivered by check-back',
      });
      const ours = answers.filter((a) => a.txId === out.txId);
      expect(ours.map((a) => a.resolution)).toContain('COMMIT');
      expect(ours.map((a) => a.resolution)).not.toContain('ROLLBACK');
      expect(await txRecord(ds, out.txId)).toMatchObject({ status: 'COMMITTED', resolved_by: 'PRODUCER' });
    } finally {
      await producer.shutdown();
    }
  });

  it('check-back fences a transaction that has not inserted yet: TransactionFencedError, nothing delivered', async () => {
    let fencedSeen = false;
    const answers: CheckBackOutcome[] = [];
    const producer: TransactionalProducer = makeProducer(
      ds,
      { topics: [TOPIC], producerGroup: GROUP, checkBack: { onResolved: (o) => answers.push(o) } },
      {
        // Stall between half send and the local transaction until the broker has checked back on it.
        afterHalf: async (half) => {
          await waitFor(
            () => answers.some((a) => a.messageId === half.messageId && a.resolution === 'ROLLBACK'),
            {
              timeoutMs: 30_000,
              description: 'the check-back to fence the transaction',
            },
          );
          fencedSeen = true;
        },
      },
    );
    await producer.start();
    const id = `order-${uuidv7()}`;
    try {
      const work = jest.fn(async () => undefined);
      const err = await producer
        .transact({ topic: TOPIC, body: { orderId: id } }, work)
        .catch((e: unknown) => e);
      expect(fencedSeen).toBe(true);
      expect(err).toBeInstanceOf(TransactionFencedError);
      const txId = (err as TransactionFencedError).txId;
      expect(work).not.toHaveBeenCalled();
      expect(await txRecord(ds, txId)).toMatchObject({ status: 'ROLLED_BACK', resolved_by: 'CHECK_BACK' });
      expect(await orderExists(ds, id)).toBe(false);
    } finally {
      await producer.shutdown();
    }
    const marker = makeProducer(ds, { topics: [TOPIC], producerGroup: GROUP });
    await marker.start();
    try {
      await flushWith(marker);
    } finally {
      await marker.shutdown();
    }
    expect(collector.received.filter((m) => m.body.includes(id))).toEqual([]);
  });
});
