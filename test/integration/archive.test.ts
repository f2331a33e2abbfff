import 'reflect-metadata';
import { DataSource } from 'typeorm';
import {
  FactReconciler,
  Retention,
  StoreError,
  rocketMqTxArchiveMigrations,
  rocketMqTxMigrations,
  uuidv7,
  type RetentionProgress,
  type RetentionReport,
} from '../../src';
import { rocketMqTxEntitiesFor } from '../../src/store/typeorm/entities';
import { TEST_DATABASE, ago, createScratchDatabase, deadlockError, qid, qs, sql } from '../helpers/db';

const DAY_MS = 24 * 3600 * 1000;
// Its own database: a purge or archive over the shared one would race other files' old rows.
const SCRATCH = `rmqtx_scratch_archive_${process.pid}`;

describe(`Retention.archive() (${TEST_DATABASE})`, () => {
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>> | undefined;
  let ds: DataSource;

  beforeAll(async () => {
    scratch = await createScratchDatabase(SCRATCH);
    ds = new DataSource({
      type: TEST_DATABASE,
      url: scratch.url,
      entities: [...rocketMqTxEntitiesFor(TEST_DATABASE)],
      migrations: [...rocketMqTxMigrations, ...rocketMqTxArchiveMigrations],
      migrationsTableName: 'rocketmq_tx_migrations',
      poolSize: 8,
    });
    await ds.initialize();
    await ds.runMigrations({ transaction: 'none' });
  });

  afterAll(async () => {
    await ds?.destroy();
    await scratch?.drop();
  });

  const retention = (extra: Partial<ConstructorParameters<typeof Retention>[0]> = {}, internals = {}) =>
    new Retention(
      { dataSource: ds, olderThanMs: 2 * DAY_MS, consumedEventOlderThanMs: 2 * DAY_MS, ...extra },
      internals,
    );

  async function txRecord(ageDays: number): Promise<string> {
    const txId = uuidv7();
    await ds.query(
      sql(`INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count, created_at)
       VALUES (?, 'COMMITTED', 'PRODUCER', 'it_archive', 'rmqtx_tx_13', 1, ${ago('?', 'DAY')})`),
      [txId, ageDays],
    );
    return txId;
  }

  let version = 0;
  async function outbox(txId: string, status: string, publishedDaysAgo: number | null): Promise<string> {
    const eventId = uuidv7();
    version++;
    const published = publishedDaysAgo === null ? 'NULL' : ago('?', 'DAY');
    await ds.query(
      sql(`INSERT INTO outbox_event (event_id, tx_id, topic, tag, ${qid('keys')}, properties, aggregate_type, aggregate_id,
         aggregate_version, event_type, event_version, payload, occurred_at, trace_id, status, attempts,
         next_attempt_at, published_at, last_error)
       VALUES (?, ?, 'rmqtx_tx_13', 'tag-a', ?, ?, 'ItArchive', 'agg-1', ?, 'Archived', 1, ?,
               ${ago(30, 'DAY')}, 'trace-1', ?, 2, ${ago('?', 'DAY')}, ${published}, 'once failed')`),
      [
        eventId,
        txId,
        JSON.stringify([eventId]),
        JSON.stringify({ EVENT_ID: eventId }),
        version,
        Buffer.from([0, 1, 2, 255]),
        status,
        publishedDaysAgo ?? 0,
        ...(publishedDaysAgo === null ? [] : [publishedDaysAgo]),
      ],
    );
    return eventId;
  }

  const COLUMNS =
    `event_id, tx_id, topic, tag, ${qid('keys')}, properties,` +
    '  aggregate_type, aggregate_id, aggregate_version, event_type,' +
    ' event_version, payload, occurred_at, trace_id, status, attempts, next_attempt_at, lease_until, lease_owner,' +
    ' published_at, last_error';
  const rowsOf = async (table: string, ids: readonly string[]) =>
    ids.length === 0
      ? []
      : ((await ds.query(
          sql(`SELECT ${COLUMNS} FROM ${table} WHERE event_id IN (${qs(ids.length)}) ORDER BY event_id`),
          [...ids],
        )) as Array<Record<string, unknown>>);
  const count = async (table: string) => Number((await ds.query(`SELECT COUNT(*) AS n FROM ${table}`))[0].n);
  const exists = async (table: string, column: string, id: string) =>
    (await ds.query(sql(`SELECT 1 AS one FROM ${table} WHERE ${column} = ?`), [id])).length === 1;

  it('plan() counts and changes nothing; archive() moves exactly the purge-eligible rows, byte for byte, in bounded batches', async () => {
    const oldTx = await txRecord(10);
    const oldSent = [
      await outbox(oldTx, 'SENT', 10),
      await outbox(oldTx, 'SENT', 9),
      await outbox(oldTx, 'SENT', 9),
    ];
    const pendingTx = await txRecord(10);
    const unsent = [
      await outbox(pendingTx, 'NEW', null),
      await outbox(pendingTx, 'IN_FLIGHT', null),
      await outbox(pendingTx, 'DEAD', null),
    ];
    const pendingSent = await outbox(pendingTx, 'SENT', 10);
    const youngTx = await txRecord(0);
    const youngSent = await outbox(youngTx, 'SENT', 0);
    await ds.query(
      sql(`INSERT INTO consumed_event (consumer_group, event_id, event_type, aggregate_type, aggregate_id,
         aggregate_version, outcome, consumed_at)
       VALUES ('it_archive', ?, 'T', 'T', 'a', 1, 'APPLIED', ${ago(10, 'DAY')}),
              ('it_archive', ?, 'T', 'T', 'a', 2, 'APPLIED', CURRENT_TIMESTAMP(3))`),
      [uuidv7(), uuidv7()],
    );
    const eligible = [...oldSent, pendingSent];
    const before = await rowsOf('outbox_event', eligible);

    const plan = await retention().plan();
    expect(plan).toMatchObject({ outboxEvents: 4, txRecords: 1, consumedEvents: 1 });
    expect(await count('outbox_event')).toBe(8);
    expect(await count('outbox_event_archive')).toBe(0);

    const progress: RetentionProgress[] = [];
    const report = await retention({ batchSize: 2 }).archive({ onProgress: (p) => progress.push(p) });
    expect(report).toMatchObject({ mode: 'archive', outboxEvents: 4, txRecords: 1, consumedEvents: 1 });
    // batchSize 2: 4 rows take 3 outbox batches (2, 2, 0), then one per other table.
    expect(progress.filter((p) => p.table === 'outbox_event').map((p) => p.rows)).toEqual([2, 4, 4]);
    expect(report.batches).toBe(5);

    expect(await rowsOf('outbox_event', eligible)).toEqual([]);
    expect(await rowsOf('outbox_event_archive', eligible)).toEqual(before);
    const archivedAt = await ds.query(
      sql('SELECT archived_at FROM outbox_event_archive WHERE event_id = ?'),
      [oldSent[0]],
    );
    expect(archivedAt[0].archived_at).toBeInstanceOf(Date);
    for (const id of [...unsent, youngSent]) expect(await exists('outbox_event', 'event_id', id)).toBe(true);
    expect(await exists('tx_record', 'tx_id', oldTx)).toBe(false);
    expect(await exists('tx_record', 'tx_id', pendingTx)).toBe(true);
    expect(await exists('tx_record', 'tx_id', youngTx)).toBe(true);
    expect(await count('consumed_event')).toBe(1);
    expect(await retention().plan()).toMatchObject({ outboxEvents: 0, txRecords: 0, consumedEvents: 0 });

    // An archived SENT event still satisfies its fact.
    const report2 = await new FactReconciler({
      dataSource: ds,
      facts: async () => ({
        facts: [
          { aggregateType: 'ItArchive', aggregateId: 'agg-1', eventType: 'Archived', aggregateVersion: 1 },
          { aggregateType: 'ItArchive', aggregateId: 'agg-1', eventType: 'Archived', aggregateVersion: 99 },
        ],
      }),
    }).run();
    expect(report2).toMatchObject({ checked: 2, ok: 1, missingCount: 1 });
    const without = await new FactReconciler({
      dataSource: ds,
      includeArchive: false,
      facts: async () => ({
        facts: [
          { aggregateType: 'ItArchive', aggregateId: 'agg-1', eventType: 'Archived', aggregateVersion: 1 },
        ],
      }),
    }).run();
    expect(without).toMatchObject({ ok: 0, missingCount: 1 });
  });

  it('an archive batch interrupted between copy and delete leaves every row in outbox_event; the re-run moves each once', async () => {
    const tx = await txRecord(10);
    const ids = [await outbox(tx, 'SENT', 5), await outbox(tx, 'SENT', 5), await outbox(tx, 'SENT', 5)];
    const archivedBefore = await count('outbox_event_archive');
    let copied: readonly string[] = [];
    const crashing = retention(
      { batchSize: 10 },
      {
        beforeArchiveDelete: async (batch: readonly string[]) => {
          copied = batch;
          // The copy is visible inside the transaction: the interruption really is between the two.
          throw new Error('process died here');
        },
      },
    );
    // Not a database error: it reaches the caller unchanged (a database error would be a StoreError).
    await expect(crashing.archive()).rejects.toThrow('process died here');
    expect([...copied].sort()).toEqual([...ids].sort());
    expect(await rowsOf('outbox_event', ids)).toHaveLength(3);
    expect(await rowsOf('outbox_event_archive', ids)).toHaveLength(0);
    expect(await count('outbox_event_archive')).toBe(archivedBefore);

    const rerun = await retention({ batchSize: 10 }).archive();
    expect(rerun.outboxEvents).toBe(3);
    expect(await rowsOf('outbox_event', ids)).toHaveLength(0);
    expect(await rowsOf('outbox_event_archive', ids)).toHaveLength(3);
    expect(await count('outbox_event_archive')).toBe(archivedBefore + 3);
  });

  it('a batch that is a deadlock victim is rolled back and run again: every row moved once', async () => {
    const tx = await txRecord(10);
    const ids = [await outbox(tx, 'SENT', 5), await outbox(tx, 'SENT', 5)];
    let calls = 0;
    const victim = retention(
      { batchSize: 10 },
      {
        beforeArchiveDelete: async () => {
          calls++;
          // What the driver reports for a deadlock (InnoDB's ER_LOCK_DEADLOCK, PostgreSQL's 40P01),
          // after the copy of the first attempt.
          if (calls === 1) throw deadlockError();
        },
      },
    );
    const report = await victim.archive();
    expect(calls).toBe(2);
    expect(report.outboxEvents).toBe(2);
    expect(await rowsOf('outbox_event', ids)).toHaveLength(0);
    expect(await rowsOf('outbox_event_archive', ids)).toHaveLength(2);
  });

  it('an eventId already in the archive is not copied twice, and its outbox row still goes', async () => {
    const tx = await txRecord(10);
    const id = await outbox(tx, 'SENT', 5);
    await ds.query(
      sql(`INSERT INTO outbox_event_archive (${COLUMNS}, archived_at)
       SELECT ${COLUMNS}, ${ago(1, 'DAY')} FROM outbox_event WHERE event_id = ?`),
      [id],
    );
    const first = await ds.query(sql('SELECT archived_at FROM outbox_event_archive WHERE event_id = ?'), [
      id,
    ]);
    await retention().archive();
    expect(await rowsOf('outbox_event', [id])).toHaveLength(0);
    const rows = await ds.query(sql('SELECT archived_at FROM outbox_event_archive WHERE event_id = ?'), [id]);
    expect(rows).toEqual(first);
  });

  it('parallel archivers take disjoint batches: each row is moved exactly once', async () => {
    const tx = await txRecord(10);
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) ids.push(await outbox(tx, 'SENT', 4));
    // allSettled: a failed archiver must not leave the others running into the next test.
    const settled = await Promise.allSettled([1, 2, 3].map(() => retention({ batchSize: 5 }).archive()));
    expect(settled.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual([
      'ok',
      'ok',
      'ok',
    ]);
    const reports = settled.map((r) => (r as PromiseFulfilledResult<RetentionReport>).value);
    expect(reports.reduce((n, r) => n + r.outboxEvents, 0)).toBe(60);
    expect(await rowsOf('outbox_event', ids)).toHaveLength(0);
    const archived = await rowsOf('outbox_event_archive', ids);
    expect(new Set(archived.map((r) => r.event_id)).size).toBe(60);
    expect(archived).toHaveLength(60);
  });

  it('archive() without the archive table fails with a StoreError and deletes nothing; purge() still works', async () => {
    const tx = await txRecord(10);
    const id = await outbox(tx, 'SENT', 5);
    await ds.query('DROP TABLE outbox_event_archive');
    const err = await retention()
      .archive()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as StoreError).message).toMatch(
      /outbox_event_archive does not exist.*rocketMqTxArchiveMigrations/,
    );
    expect(await exists('outbox_event', 'event_id', id)).toBe(true);
    expect(await exists('tx_record', 'tx_id', tx)).toBe(true);
    const purged = await retention().purge();
    expect(purged).toMatchObject({ mode: 'purge', outboxEvents: 1, txRecords: 1 });
    expect(await exists('outbox_event', 'event_id', id)).toBe(false);
  });
});
