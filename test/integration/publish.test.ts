import type { DataSource, EntityManager } from 'typeorm';
import {
  NoActiveTransactionError,
  InvalidOptionError,
  TransactionalProducer,
  uuidv7,
  type PublishResult,
} from '../../src';
import { Collector } from '../helpers/collector';
import { ensureSchema, openDataSource, orderExists, sql, txRecord } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';

const TOPIC = 'rmqtx_tx_join_0';
const GROUP = 'it_publish';

/** publish(manager, events): the producer joins the caller's own transaction. */
describe('publish() inside the caller transaction, against the real broker and database', () => {
  let ds: DataSource;
  let collector: Collector;
  let producer: TransactionalProducer;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    collector = await new Collector(TOPIC).start();
    producer = makeProducer(ds, { topics: [TOPIC], producerGroup: GROUP });
    await producer.start();
  });

  afterAll(async () => {
    await producer?.shutdown();
    await collector?.stop();
    await ds?.destroy();
  });

  async function insertOrder(manager: EntityManager, id: string, note = 'publish'): Promise<void> {
    await manager.query(sql('INSERT INTO test_order (id, note) VALUES (?, ?)'), [id, note]);
  }

  async function outboxRows(
    eventIds: readonly string[],
  ): Promise<Array<{ event_id: string; status: string }>> {
    if (eventIds.length === 0) return [];
    const marks = eventIds.map(() => '?').join(', ');
    return ds.query(sql(`SELECT event_id, status FROM outbox_event WHERE event_id IN (${marks})`), [
      ...eventIds,
    ]);
  }

  /** Commits a marker the same way and waits for it: anything sent before it has had its chance. */
  async function flush(): Promise<void> {
    const id = `marker-${uuidv7()}`;
    const result = await ds.transaction(async (m) => {
      await insertOrder(m, id, 'marker');
      return producer.publish(m, { topic: TOPIC, body: { marker: id } });
    });
    await waitFor(() => collector.withProperty('TX_ID', result.txId).length > 0, {
      timeoutMs: 30_000,
      description: `marker ${result.txId} delivered`,
    });
  }

  function delivered(eventId: string): number {
    return collector.withProperty('EVENT_ID', eventId).length;
  }

  it('commit: the business row, tx_record and outbox rows committed with it; delivered once', async () => {
    const id = `order-${uuidv7()}`;
    const result = await ds.transaction(async (manager) => {
      await insertOrder(manager, id);
      const out = await producer.publish(manager, { topic: TOPIC, keys: [id], body: { orderId: id } });
      // Still inside the caller's transaction: the fence row is only visible to it.
      expect(await txRecord(ds, out.txId)).toBeUndefined();
      return out;
    });
    expect(result.delivery).toBe('transactional');
    expect(result.messageIds).toHaveLength(1);
    await expect(result.outcome).resolves.toBe('committed');
    expect(await orderExists(ds, id)).toBe(true);
    expect(await txRecord(ds, result.txId)).toMatchObject({ status: 'COMMITTED', resolved_by: 'PRODUCER' });
    await waitFor(() => delivered(result.eventIds[0]!) > 0, { description: 'committed event delivered' });
    const [got] = collector.withProperty('TX_ID', result.txId);
    expect(JSON.parse(got!.body)).toEqual({ orderId: id });
    expect(got!.properties).toMatchObject({ TX_ORIGIN: GROUP, EVENT_ID: result.eventIds[0] });
    await flush();
    expect(delivered(result.eventIds[0]!)).toBe(1);
    expect((await outboxRows(result.eventIds)).map((r) => r.event_id)).toEqual(result.eventIds);
  });

  it('rollback: nothing committed, never delivered', async () => {
    const id = `order-${uuidv7()}`;
    let published: PublishResult | undefined;
    const boom = new Error('payment declined');
    await expect(
      ds.transaction(async (manager) => {
        await insertOrder(manager, id);
        published = await producer.publish(manager, { topic: TOPIC, body: { orderId: id } });
        throw boom;
      }),
    ).rejects.toBe(boom);
    await expect(published!.outcome).resolves.toBe('rolled_back');
    expect(await orderExists(ds, id)).toBe(false);
    expect(await txRecord(ds, published!.txId)).toBeUndefined();
    expect(await outboxRows(published!.eventIds)).toEqual([]);
    await flush();
    expect(collector.withProperty('TX_ID', published!.txId)).toEqual([]);
  });

  it('several publish calls in one transaction share one txId and one tx_record row; all delivered', async () => {
    const id = `order-${uuidv7()}`;
    const [first, second, third] = await ds.transaction(async (manager) => {
      const a = await producer.publish(manager, { topic: TOPIC, body: 'first' });
      await insertOrder(manager, id);
      const b = await producer.publish(manager, [
        { topic: TOPIC, body: 'second' },
        { topic: TOPIC, body: 'third' },
      ]);
      const c = await producer.publish(manager, { topic: TOPIC, body: 'fourth' }, { delivery: 'outbox' });
      return [a, b, c];
    });
    expect(second!.txId).toBe(first!.txId);
    expect(third!.txId).toBe(first!.txId);
    expect(third!.delivery).toBe('outbox');
    expect(third!.messageIds).toEqual([]);
    await expect(first!.outcome).resolves.toBe('committed');
    const rows = await ds.query(sql('SELECT status FROM tx_record WHERE tx_id = ?'), [first!.txId]);
    expect(rows).toEqual([{ status: 'COMMITTED' }]);
    const halves = [...first!.eventIds, ...second!.eventIds];
    await waitFor(() => halves.every((e) => delivered(e) > 0), {
      description: 'three half messages delivered',
    });
    expect(
      (await outboxRows(third!.eventIds)).map((r) => r.status),
      // The outbox row of the outbox-delivery call waits for the relay (none runs here).
    ).toEqual(['NEW']);
    await flush();
    for (const e of halves) expect(delivered(e)).toBe(1);
    expect(delivered(third!.eventIds[0]!)).toBe(0);
  });

  it('no active transaction: NoActiveTransactionError, nothing written or sent', async () => {
    const eventId = uuidv7();
    const event = { topic: TOPIC, body: 'never', eventId };
    // The DataSource's own manager has no QueryRunner.
    const err = await producer.publish(ds.manager, event).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoActiveTransactionError);
    expect(err).toMatchObject({ code: 'NO_ACTIVE_TRANSACTION', retriable: false });
    // A QueryRunner without a transaction, and one whose transaction is over.
    const qr = ds.createQueryRunner();
    try {
      await expect(producer.publish(qr.manager, event)).rejects.toBeInstanceOf(NoActiveTransactionError);
      await qr.startTransaction();
      await qr.commitTransaction();
      await expect(producer.publish(qr.manager, event)).rejects.toBeInstanceOf(NoActiveTransactionError);
    } finally {
      await qr.release();
    }
    // Not a manager at all, or one of another DataSource: InvalidOptionError naming `manager`.
    await expect(producer.publish({} as EntityManager, event)).rejects.toMatchObject({ option: 'manager' });
    const other = await openDataSource({ poolSize: 1 });
    try {
      const otherErr = await other.transaction((m) => producer.publish(m, event)).catch((e: unknown) => e);
      expect(otherErr).toBeInstanceOf(InvalidOptionError);
    } finally {
      await other.destroy();
    }
    expect(await outboxRows([eventId])).toEqual([]);
    await flush();
    expect(delivered(eventId)).toBe(0);
  });

  it('a savepoint released is not mistaken for the commit; a savepoint rolled back undoes its publish (own fence row)', async () => {
    const id = `order-${uuidv7()}`;
    let inner: PublishResult | undefined;
    let undone: PublishResult | undefined;
    const outer = await ds.transaction(async (manager) => {
      // Nested transaction (SAVEPOINT) that is released: its publish belongs to the outer one.
      inner = await manager.transaction((nested) =>
        producer.publish(nested, { topic: TOPIC, body: 'inner-released' }),
      );
      let settledEarly = false;
      void inner.outcome.then(() => (settledEarly = true));
      await insertOrder(manager, id);
      // Nested transaction rolled back to its savepoint: its event must never go out.
      const rollback = new Error('nested step failed');
      await manager
        .transaction(async (nested) => {
          undone = await producer.publish(nested, { topic: TOPIC, body: 'inner-rolled-back' });
          throw rollback;
        })
        .catch((e: unknown) => {
          if (e !== rollback) throw e;
        });
      expect(settledEarly).toBe(false);
      return producer.publish(manager, { topic: TOPIC, body: 'outer' });
    });
    expect(inner!.txId).toBe(outer.txId);
    // The rolled-back savepoint's call had its own fence row, undone with the savepoint: a
    // check-back of its half message finds no row and answers ROLLBACK.
    expect(undone!.txId).not.toBe(outer.txId);
    await expect(undone!.outcome).resolves.toBe('rolled_back');
    expect(await txRecord(ds, undone!.txId)).toBeUndefined();
    await expect(outer.outcome).resolves.toBe('committed');
    await waitFor(() => delivered(inner!.eventIds[0]!) > 0 && delivered(outer.eventIds[0]!) > 0, {
      description: 'released-savepoint and outer events delivered',
    });
    expect(await outboxRows(undone!.eventIds)).toEqual([]);
    await flush();
    expect(delivered(undone!.eventIds[0]!)).toBe(0);
    expect(delivered(inner!.eventIds[0]!)).toBe(1);
  });

  it('the fence row inside a rolled-back savepoint: a later publish takes a new txId; the outer rollback sends nothing', async () => {
    let undone: PublishResult | undefined;
    let later: PublishResult | undefined;
    const abort = new Error('abort outer');
    await expect(
      ds.transaction(async (manager) => {
        const nestedFailure = new Error('nested');
        await manager
          .transaction(async (nested) => {
            undone = await producer.publish(nested, { topic: TOPIC, body: 'first-in-savepoint' });
            throw nestedFailure;
          })
          .catch((e: unknown) => {
            if (e !== nestedFailure) throw e;
          });
        later = await producer.publish(manager, { topic: TOPIC, body: 'after-savepoint' });
        throw abort;
      }),
    ).rejects.toBe(abort);
    await expect(undone!.outcome).resolves.toBe('rolled_back');
    await expect(later!.outcome).resolves.toBe('rolled_back');
    expect(later!.txId).not.toBe(undone!.txId);
    expect(await txRecord(ds, undone!.txId)).toBeUndefined();
    expect(await txRecord(ds, later!.txId)).toBeUndefined();
    await flush();
    expect(collector.withProperty('TX_ID', undone!.txId)).toEqual([]);
    expect(collector.withProperty('TX_ID', later!.txId)).toEqual([]);
  });

  it('a QueryRunner transaction (no callback): commit ends the broker transaction; the runner is released by the caller', async () => {
    const qr = ds.createQueryRunner();
    await qr.connect();
    await qr.startTransaction();
    let out: PublishResult;
    try {
      out = await producer.publish(qr.manager, { topic: TOPIC, body: 'query-runner' });
      await qr.commitTransaction();
    } finally {
      await qr.release();
    }
    await expect(out.outcome).resolves.toBe('committed');
    await waitFor(() => delivered(out.eventIds[0]!) > 0, { description: 'query-runner event delivered' });
  });
});
