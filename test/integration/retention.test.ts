import type { DataSource } from 'typeorm';
import { InvalidOptionError, Retention, uuidv7 } from '../../src';
import { TEST_DATABASE, ago, ensureSchema, openDataSource, qid, sql } from '../helpers/db';

const DAY_MS = 24 * 3600 * 1000;

describe(`Retention purge (${TEST_DATABASE})`, () => {
  let ds: DataSource;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
  });
  afterAll(async () => {
    await ds?.destroy();
  });

  async function txRecord(ageDays: number): Promise<string> {
    const txId = uuidv7();
    await ds.query(
      sql(`INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count, created_at)
       VALUES (?, 'COMMITTED', 'PRODUCER', 'it_retention', 'rmqtx_tx_9', 1, ${ago('?', 'DAY')})`),
      [txId, ageDays],
    );
    return txId;
  }

  async function outbox(txId: string, status: string, publishedDaysAgo: number | null): Promise<string> {
    const eventId = uuidv7();
    const published = publishedDaysAgo === null ? 'NULL' : ago('?', 'DAY');
    await ds.query(
      sql(`INSERT INTO outbox_event (event_id, tx_id, topic, ${qid('keys')}, properties, payload, occurred_at, status, attempts, next_attempt_at, published_at)
       VALUES (?, ?, 'rmqtx_tx_9', '[]', '{}', 'x', CURRENT_TIMESTAMP(3), ?, 0, ${ago('?', 'DAY')}, ${published})`),
      // A SENT row's next_attempt_at is its last claim (+ lease) or insert: about its publish time.
      [
        eventId,
        txId,
        status,
        publishedDaysAgo ?? 0,
        ...(publishedDaysAgo === null ? [] : [publishedDaysAgo]),
      ],
    );
    return eventId;
  }

  async function consumed(ageDays: number): Promise<string> {
    const eventId = uuidv7();
    await ds.query(
      sql(`INSERT INTO consumed_event (consumer_group, event_id, event_type, aggregate_type, aggregate_id,
                                   aggregate_version, outcome, consumed_at)
       VALUES ('it_retention', ?, 'Test', 'Test', 'a-1', 1, 'APPLIED', ${ago('?', 'DAY')})`),
      [eventId, ageDays],
    );
    return eventId;
  }

  const exists = async (table: string, column: string, id: string) =>
    (await ds.query(sql(`SELECT 1 AS one FROM ${table} WHERE ${column} = ?`), [id])).length === 1;

  it('removes only what nothing can still need, in bounded batches', async () => {
    // Settled and old: goes.
    const oldTx = await txRecord(10);
    const oldSent = [
      await outbox(oldTx, 'SENT', 10),
      await outbox(oldTx, 'SENT', 9),
      await outbox(oldTx, 'SENT', 9),
    ];
    // Old transaction with an event still to deliver: the tx_record and the unsent rows stay.
    const pendingTx = await txRecord(10);
    const unsent = [
      await outbox(pendingTx, 'NEW', null),
      await outbox(pendingTx, 'IN_FLIGHT', null),
      await outbox(pendingTx, 'DEAD', null),
    ];
    const pendingSent = await outbox(pendingTx, 'SENT', 10);
    // Young: stays.
    const youngTx = await txRecord(0);
    const youngSent = await outbox(youngTx, 'SENT', 0);
    const oldConsumed = [await consumed(10), await consumed(10)];
    const youngConsumed = await consumed(0);

    const report = await new Retention({
      dataSource: ds,
      olderThanMs: 2 * DAY_MS,
      consumedEventOlderThanMs: 2 * DAY_MS,
      batchSize: 2,
    }).purge();

    for (const id of oldSent) expect(await exists('outbox_event', 'event_id', id)).toBe(false);
    expect(await exists('outbox_event', 'event_id', pendingSent)).toBe(false);
    expect(await exists('tx_record', 'tx_id', oldTx)).toBe(false);
    for (const id of unsent) expect(await exists('outbox_event', 'event_id', id)).toBe(true);
    expect(await exists('tx_record', 'tx_id', pendingTx)).toBe(true);
    expect(await exists('tx_record', 'tx_id', youngTx)).toBe(true);
    expect(await exists('outbox_event', 'event_id', youngSent)).toBe(true);
    for (const id of oldConsumed) expect(await exists('consumed_event', 'event_id', id)).toBe(false);
    expect(await exists('consumed_event', 'event_id', youngConsumed)).toBe(true);
    expect(report.outboxEvents).toBeGreaterThanOrEqual(4);
    expect(report.consumedEvents).toBeGreaterThanOrEqual(2);
    // batchSize 2: at least 3 statements for outbox_event alone (4 rows), one per table more.
    expect(report.batches).toBeGreaterThanOrEqual(5);
  });

  it('keeps a tx_record younger than the check-back horizon even when older than the age', async () => {
    const txId = await txRecord(1);
    // 12 h, not seconds: rows of test files running in parallel must not be touched.
    await new Retention({ dataSource: ds, olderThanMs: DAY_MS / 2, checkBackHorizonMs: 2 * DAY_MS }).purge();
    expect(await exists('tx_record', 'tx_id', txId)).toBe(true);
  });

  it('validates its options', () => {
    expect(() => new Retention({ dataSource: ds, olderThanMs: 10 })).toThrow(InvalidOptionError);
    expect(() => new Retention({ dataSource: ds, batchSize: 0 })).toThrow(/batchSize: got 0/);
    expect(() => new Retention({ dataSource: {} as DataSource })).toThrow(/dataSource/);
  });
});
