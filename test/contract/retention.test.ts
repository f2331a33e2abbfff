import type { DataSource } from 'typeorm';
import { Retention, type RetentionProgress } from '../../src';
import { ARCHIVED_OUTBOX_COLUMNS } from '../../src/store/typeorm/outboxArchiveMigrations';
import { TEST_DATABASE, ensureSchema, openDataSource, p, ps } from '../helpers/db';
import {
  DAY_MS,
  ensureArchiveTable,
  insertConsumed,
  insertOutbox,
  insertTx,
  present,
  runTag,
  cleanUpOps,
} from './opsSupport';

/**
 * Retention on the database ROCKETMQ_TX_DB_URL names: the same eligibility rules on every
 * database, bounded batches (PostgreSQL has no DELETE ... LIMIT: batches by key), the archive copy.
 */
describe(`Retention (${TEST_DATABASE})`, () => {
  let ds: DataSource;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    await ensureArchiveTable(ds);
  });
  afterAll(async () => {
    if (ds) await cleanUpOps(ds);
    await ds?.destroy();
  });

  /** Old settled rows, rows something still needs, young rows: one topic per test. */
  async function fixture(topic: string, group: string) {
    const oldTx = await insertTx(ds, { topic, ageMs: 10 * DAY_MS });
    const payload = Buffer.from([0x00, 0xff, 0x27, 0x5c, 0x0a]);
    const oldSent = [
      await insertOutbox(ds, { txId: oldTx, topic, status: 'SENT', ageMs: 10 * DAY_MS, payload }),
      await insertOutbox(ds, { txId: oldTx, topic, status: 'SENT', ageMs: 9 * DAY_MS, payload }),
      await insertOutbox(ds, { txId: oldTx, topic, status: 'SENT', ageMs: 9 * DAY_MS, payload }),
    ];
    const pendingTx = await insertTx(ds, { topic, ageMs: 10 * DAY_MS });
    const unsent = [
      await insertOutbox(ds, { txId: pendingTx, topic, status: 'NEW', ageMs: 10 * DAY_MS }),
      await insertOutbox(ds, { txId: pendingTx, topic, status: 'IN_FLIGHT', ageMs: 10 * DAY_MS }),
      await insertOutbox(ds, { txId: pendingTx, topic, status: 'DEAD', ageMs: 10 * DAY_MS }),
    ];
    const pendingSent = await insertOutbox(ds, {
      txId: pendingTx,
      topic,
      status: 'SENT',
      ageMs: 10 * DAY_MS,
    });
    const youngTx = await insertTx(ds, { topic, ageMs: 0 });
    const youngSent = await insertOutbox(ds, { txId: youngTx, topic, status: 'SENT', ageMs: 0 });
    const oldConsumed = [
      await insertConsumed(ds, { group, ageMs: 10 * DAY_MS }),
      await insertConsumed(ds, { group, ageMs: 10 * DAY_MS }),
      await insertConsumed(ds, { group, ageMs: 10 * DAY_MS }),
    ];
    const youngConsumed = await insertConsumed(ds, { group, ageMs: 0 });
    return {
      oldTx,
      oldSent,
      pendingTx,
      unsent,
      pendingSent,
      youngTx,
      youngSent,
      oldConsumed,
      youngConsumed,
      payload,
    };
  }

  const options = { olderThanMs: 2 * DAY_MS, consumedEventOlderThanMs: 2 * DAY_MS, checkBackHorizonMs: 1000 };

  it('purge removes only what nothing still needs, in batches of at most batchSize rows', async () => {
    const tag = runTag();
    const f = await fixture(`ct_ret_${tag}`, `ct_ret_${tag}`);
    const retention = new Retention({ dataSource: ds, ...options, batchSize: 2 });
    const plan = await retention.plan();
    expect(plan.outboxEvents).toBeGreaterThanOrEqual(4);
    expect(plan.txRecords).toBeGreaterThanOrEqual(1);
    expect(plan.consumedEvents).toBeGreaterThanOrEqual(3);
    // plan changed nothing
    expect(await present(ds, 'outbox_event', 'event_id', f.oldSent)).toEqual([...f.oldSent].sort());

    const progress: RetentionProgress[] = [];
    const report = await retention.purge({ onProgress: (x) => progress.push(x) });
    expect(report.mode).toBe('purge');
    expect(report.outboxEvents).toBeGreaterThanOrEqual(4);
    expect(report.consumedEvents).toBeGreaterThanOrEqual(3);
    // Every batch took at most 2 rows, and the outbox needed more than one batch (the row count of
    // each DELETE is read: a driver that reported 0 would stop after the first).
    for (const table of ['outbox_event', 'consumed_event'] as const) {
      const steps = progress.filter((x) => x.table === table);
      expect(steps.length).toBeGreaterThanOrEqual(2);
      steps.forEach((s, i) => expect(s.rows - (i > 0 ? steps[i - 1]!.rows : 0)).toBeLessThanOrEqual(2));
    }

    expect(await present(ds, 'outbox_event', 'event_id', [...f.oldSent, f.pendingSent])).toEqual([]);
    expect(await present(ds, 'outbox_event', 'event_id', f.unsent)).toEqual([...f.unsent].sort());
    expect(await present(ds, 'outbox_event', 'event_id', [f.youngSent])).toEqual([f.youngSent]);
    expect(await present(ds, 'tx_record', 'tx_id', [f.oldTx, f.pendingTx, f.youngTx])).toEqual(
      [f.pendingTx, f.youngTx].sort(),
    );
    expect(await present(ds, 'consumed_event', 'event_id', [...f.oldConsumed, f.youngConsumed])).toEqual([
      f.youngConsumed,
    ]);
    // Nothing left to take: a second purge takes none of these rows.
    const again = await retention.plan();
    expect(again.outboxEvents).toBe(0);
  });

  it('archive moves old SENT rows to outbox_event_archive in batches (bodies intact) and copies an archived key once', async () => {
    const tag = runTag();
    const f = await fixture(`ct_arc_${tag}`, `ct_arc_${tag}`);
    // One row is already in the archive (an interrupted run of another version): not copied twice.
    const q = TEST_DATABASE === 'postgres' ? '"' : '`';
    const columns = ARCHIVED_OUTBOX_COLUMNS.map((c) => `${q}${c}${q}`).join(', ');
    await ds.query(
      `INSERT INTO outbox_event_archive (${columns}, archived_at)
       SELECT ${columns}, CURRENT_TIMESTAMP(3) FROM outbox_event WHERE event_id = ${p(1)}`,
      [f.oldSent[0]],
    );
    const progress: RetentionProgress[] = [];
    const report = await new Retention({ dataSource: ds, ...options, batchSize: 2 }).archive({
      onProgress: (x) => progress.push(x),
    });
    expect(report.mode).toBe('archive');
    expect(report.outboxEvents).toBeGreaterThanOrEqual(4);
    const outboxSteps = progress.filter((x) => x.table === 'outbox_event');
    expect(outboxSteps.length).toBeGreaterThanOrEqual(2);

    const moved = [...f.oldSent, f.pendingSent];
    expect(await present(ds, 'outbox_event', 'event_id', moved)).toEqual([]);
    expect(await present(ds, 'outbox_event_archive', 'event_id', moved)).toEqual([...moved].sort());
    expect(await present(ds, 'outbox_event_archive', 'event_id', [...f.unsent, f.youngSent])).toEqual([]);
    const rows: Array<{ event_id: string; payload: Buffer; status: string }> = await ds.query(
      `SELECT event_id, payload, status FROM outbox_event_archive WHERE event_id IN (${ps(f.oldSent.length)})`,
      f.oldSent,
    );
    expect(rows).toHaveLength(3);
    for (const r of rows) {
      expect(Buffer.from(r.payload).equals(f.payload)).toBe(true);
      expect(r.status).toBe('SENT');
    }
    // tx_record and consumed_event are purged as by purge().
    expect(await present(ds, 'tx_record', 'tx_id', [f.oldTx, f.pendingTx])).toEqual([f.pendingTx]);
    expect(await present(ds, 'consumed_event', 'event_id', f.oldConsumed)).toEqual([]);
  });
});
