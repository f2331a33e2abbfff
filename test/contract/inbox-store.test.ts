import type { DataSource, EntityManager } from 'typeorm';
import { uuidv7 } from '../../src';
import { storesFor } from '../../src/store';
import type { ConsumedRow, CursorKey, InboxStore, InboxTransaction } from '../../src/store/ports';
import { ensureSchema, openDataSource } from '../helpers/db';
import { TEST_DATABASE, cleanUp, p, ps, sessionId, unique, waitUntilLockWaiting } from './support';

/** The consumer's inbox (dedupe row, aggregate cursor) on the database under test. */
describe(`inbox store (${TEST_DATABASE})`, () => {
  let ds: DataSource;
  let inbox: InboxStore;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    inbox = storesFor(ds).inbox;
  });

  afterAll(async () => {
    if (ds) await cleanUp(ds);
    await ds?.destroy();
  });

  function row(group: string, aggregateId: string, version: number, eventId = uuidv7()): ConsumedRow {
    return {
      consumerGroup: group,
      eventId,
      eventType: 'OrderCreated',
      aggregateType: 'Order',
      aggregateId,
      aggregateVersion: version,
    };
  }

  const effect = (m: EntityManager, r: ConsumedRow) =>
    m.query(
      `INSERT INTO test_consumer_effect (consumer_group, aggregate_id, aggregate_version, event_id) VALUES (${ps(4)})`,
      [r.consumerGroup, r.aggregateId, r.aggregateVersion, r.eventId],
    );
  const effects = async (group: string) =>
    Number(
      (
        await ds.query(`SELECT COUNT(*) AS n FROM test_consumer_effect WHERE consumer_group = ${p(1)}`, [
          group,
        ])
      )[0].n,
    );
  const consumed = async (r: ConsumedRow) =>
    (
      await ds.query(
        `SELECT outcome FROM consumed_event WHERE consumer_group = ${p(1)} AND event_id = ${p(2)}`,
        [r.consumerGroup, r.eventId],
      )
    )[0] as { outcome: string } | undefined;

  it('the dedupe row and the business change commit together; a duplicate is skipped and the transaction goes on', async () => {
    const group = unique('g');
    const r = row(group, unique('o'), 1);
    const first = await inbox.transaction(async (tx) => {
      const inserted = await tx.insertConsumed(r);
      if (inserted) await effect(tx.manager, r);
      return { commit: true, value: inserted };
    });
    expect(first).toBe(true);
    const second = await inbox.transaction(async (tx) => {
      const inserted = await tx.insertConsumed(r);
      // The transaction is still usable after the duplicate (PostgreSQL aborts it on any error).
      const cursor = await tx.lockCursor(r);
      return { commit: true, value: { inserted, cursor } };
    });
    expect(second).toEqual({ inserted: false, cursor: 0 });
    expect(await effects(group)).toBe(1);
    expect(await consumed(r)).toEqual({ outcome: 'APPLIED' });
  });

  it('rolled back, neither the dedupe row nor the business change stays', async () => {
    const group = unique('g');
    const r = row(group, unique('o'), 1);
    await inbox.transaction(async (tx) => {
      await tx.insertConsumed(r);
      await effect(tx.manager, r);
      return { commit: false, value: undefined };
    });
    await expect(
      inbox.transaction(async (tx) => {
        await tx.insertConsumed(r);
        await effect(tx.manager, r);
        throw new Error('handler failed');
      }),
    ).rejects.toThrow('handler failed');
    expect(await effects(group)).toBe(0);
    expect(await consumed(r)).toBeUndefined();
  });

  it('markOutcome records STALE and IGNORED decisions', async () => {
    const group = unique('g');
    const stale = row(group, unique('o'), 1);
    const ignored = row(group, unique('o'), 1);
    await inbox.transaction(async (tx) => {
      await tx.insertConsumed(stale);
      await tx.markOutcome(stale, 'STALE');
      await tx.insertConsumed(ignored);
      await tx.markOutcome(ignored, 'IGNORED');
      return { commit: true, value: undefined };
    });
    expect(await consumed(stale)).toEqual({ outcome: 'STALE' });
    expect(await consumed(ignored)).toEqual({ outcome: 'IGNORED' });
  });

  it('aggregate_cursor starts at 0, advances, and keeps skipped versions per group and aggregate', async () => {
    const key: CursorKey = { consumerGroup: unique('g'), aggregateType: 'Order', aggregateId: unique('o') };
    const other: CursorKey = { ...key, consumerGroup: unique('g') };
    const advance = (k: CursorKey, to: number, skipped: number) =>
      inbox.transaction(async (tx) => {
        const from = await tx.lockCursor(k);
        await tx.advanceCursor(k, to, skipped);
        return { commit: true, value: from };
      });
    expect(await advance(key, 1, 0)).toBe(0);
    expect(await advance(key, 4, 2)).toBe(1);
    expect(await advance(other, 7, 0)).toBe(0);
    const read = (k: CursorKey) =>
      inbox.transaction(async (tx) => ({ commit: false, value: await tx.lockCursor(k) }));
    expect(await read(key)).toBe(4);
    expect(await read(other)).toBe(7);
    const rows = await ds.query(
      `SELECT last_version, skipped_versions FROM aggregate_cursor
       WHERE consumer_group = ${p(1)} AND aggregate_type = ${p(2)} AND aggregate_id = ${p(3)}`,
      [key.consumerGroup, key.aggregateType, key.aggregateId],
    );
    expect(
      rows.map((r: Record<string, unknown>) => [Number(r.last_version), Number(r.skipped_versions)]),
    ).toEqual([[4, 2]]);
  });

  it('claimVersion locks and moves the cursor in one step: next, stale, gap held or accepted, new rows, rollback', async () => {
    const newKey = (): CursorKey => ({
      consumerGroup: unique('g'),
      aggregateType: 'Order',
      aggregateId: unique('o'),
    });
    const claim = (k: CursorKey, version: number, acceptGap: boolean, commit = true) =>
      inbox.transaction(async (tx) => ({ commit, value: await tx.claimVersion(k, version, acceptGap) }));
    const state = async (k: CursorKey) =>
      (
        await ds.query(
          `SELECT last_version, skipped_versions FROM aggregate_cursor
           WHERE consumer_group = ${p(1)} AND aggregate_type = ${p(2)} AND aggregate_id = ${p(3)}`,
          [k.consumerGroup, k.aggregateType, k.aggregateId],
        )
      ).map((r: Record<string, unknown>) => [Number(r.last_version), Number(r.skipped_versions)]);
    const key = newKey();
    expect(await claim(key, 1, false)).toBe(0); // a new row, at the first version
    expect(await state(key)).toEqual([[1, 0]]);
    expect(await claim(key, 2, false)).toBe(1); // the next version
    expect(await state(key)).toEqual([[2, 0]]);
    expect(await claim(key, 2, true)).toBe(2); // stale: the same version
    expect(await claim(key, 1, true)).toBe(2); // stale: an older one
    expect(await state(key)).toEqual([[2, 0]]);
    expect(await claim(key, 5, false)).toBe(2); // a gap, held back
    expect(await state(key)).toEqual([[2, 0]]);
    expect(await claim(key, 5, true)).toBe(2); // a gap, accepted: versions 3 and 4 skipped
    expect(await state(key)).toEqual([[5, 2]]);
    expect(await claim(key, 6, false, false)).toBe(5); // rolled back: nothing moved
    expect(await state(key)).toEqual([[5, 2]]);
    expect(await claim(key, 6, false)).toBe(5);
    expect(await state(key)).toEqual([[6, 2]]);
    const held = newKey();
    expect(await claim(held, 3, false)).toBe(0); // a new row with a gap held back: created at 0
    expect(await state(held)).toEqual([[0, 0]]);
    const accepted = newKey();
    expect(await claim(accepted, 3, true)).toBe(0); // a new row with a gap accepted
    expect(await state(accepted)).toEqual([[3, 2]]);
  });

  /**
   * `step` runs in two transactions on the same aggregate: the first holds the cursor until the
   * second, started after it, waits on the lock; then both commit. Resolves with their values.
   */
  async function secondWaitsForFirst(
    step: (tx: InboxTransaction, n: 1 | 2) => Promise<number>,
  ): Promise<[number, number]> {
    let releaseFirst!: () => void;
    const firstMayCommit = new Promise<void>((resolve) => (releaseFirst = resolve));
    let firstLocked!: () => void;
    const locked = new Promise<void>((resolve) => (firstLocked = resolve));
    const first = inbox.transaction(async (tx) => {
      const value = await step(tx, 1);
      firstLocked();
      await firstMayCommit;
      return { commit: true, value };
    });
    await locked;
    let secondSession!: (id: number) => void;
    const session = new Promise<number>((resolve) => (secondSession = resolve));
    const second = inbox.transaction(async (tx) => {
      secondSession(await sessionId(tx.manager));
      return { commit: true, value: await step(tx, 2) };
    });
    await waitUntilLockWaiting(ds, await session);
    releaseFirst();
    return [await first, await second];
  }

  it('claimVersion: a second consumer of the same aggregate waits, then sees the version the first committed', async () => {
    const key: CursorKey = { consumerGroup: unique('g'), aggregateType: 'Order', aggregateId: unique('o') };
    expect(await secondWaitsForFirst((tx, n) => tx.claimVersion(key, n, false))).toEqual([0, 1]);
    const read = await inbox.transaction(async (tx) => ({ commit: false, value: await tx.lockCursor(key) }));
    expect(read).toBe(2);
  });

  it('a second consumer of the same aggregate waits for the cursor and then sees the advanced version', async () => {
    for (const existing of [false, true]) {
      const key: CursorKey = { consumerGroup: unique('g'), aggregateType: 'Order', aggregateId: unique('o') };
      if (existing) {
        await inbox.transaction(async (tx) => {
          await tx.lockCursor(key);
          return { commit: true, value: undefined };
        });
      }
      const lockAndAdvance = async (tx: InboxTransaction) => {
        const from = await tx.lockCursor(key);
        await tx.advanceCursor(key, from + 1, 0);
        return from;
      };
      expect(await secondWaitsForFirst(lockAndAdvance)).toEqual([0, 1]);
    }
  });

  it('two consumers of the same event: one applies it, the other sees the duplicate', async () => {
    const group = unique('g');
    const r = row(group, unique('o'), 1);
    let releaseFirst!: () => void;
    const firstMayCommit = new Promise<void>((resolve) => (releaseFirst = resolve));
    let firstInserted!: () => void;
    const inserted = new Promise<void>((resolve) => (firstInserted = resolve));
    const first = inbox.transaction(async (tx) => {
      const ok = await tx.insertConsumed(r);
      if (ok) await effect(tx.manager, r);
      firstInserted();
      await firstMayCommit;
      return { commit: true, value: ok };
    });
    await inserted;
    let secondSession!: (id: number) => void;
    const session = new Promise<number>((resolve) => (secondSession = resolve));
    const second = inbox.transaction(async (tx) => {
      secondSession(await sessionId(tx.manager));
      const ok = await tx.insertConsumed(r);
      if (ok) await effect(tx.manager, r);
      return { commit: true, value: ok };
    });
    await waitUntilLockWaiting(ds, await session);
    releaseFirst();
    expect(await first).toBe(true);
    expect(await second).toBe(false);
    expect(await effects(group)).toBe(1);
  });
});
