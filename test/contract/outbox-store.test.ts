import type { DataSource } from 'typeorm';
import { InvalidMessageError, uuidv7 } from '../../src';
import { storesFor } from '../../src/store';
import type { OutboxStore } from '../../src/store/ports';
import { outboxSqlFor } from '../../src/store/typeorm/outboxStore';
import { execute } from '../../src/store/typeorm/statements';
import { ensureSchema, openDataSource } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { TEST_DATABASE, cleanUp, insertTxRecord, newEvent, outboxRow, unique } from './support';

/** The outbox store (producer rows, relay claims and outcomes) on the database under test. */
describe(`outbox store (${TEST_DATABASE})`, () => {
  let ds: DataSource;
  let store: OutboxStore;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    store = storesFor(ds).outbox;
  });

  afterAll(async () => {
    if (ds) await cleanUp(ds);
    await ds?.destroy();
  });

  async function insert(status: 'NEW' | 'IN_FLIGHT', topic: string, count: number, group = unique('g')) {
    const txId = uuidv7();
    const events = Array.from({ length: count }, () => newEvent(txId, topic, status));
    await ds.transaction(async (m) => {
      await insertTxRecord(ds, txId, 'COMMITTED', group);
      await store.insertEvents(m, events);
    });
    return { txId, events };
  }

  it('insertEvents writes every event in one statement and a claim rebuilds them exactly', async () => {
    const topic = unique('t');
    const txId = uuidv7();
    const occurredAt = new Date('2026-03-04T05:06:07.089Z');
    const events = [
      newEvent(txId, topic, 'NEW', {
        tag: 'created',
        keys: ['k1', "quote'd"],
        properties: { TX_ID: txId, 'x-y': 'ü\u0000z' },
        body: Buffer.from([0, 1, 2, 255, 39, 92]),
        aggregateType: 'Order',
        aggregateId: unique('o'),
        aggregateVersion: 1,
        eventType: 'OrderCreated',
        eventVersion: 2,
        occurredAt,
        traceId: 'trace',
      }),
      newEvent(txId, topic, 'NEW'),
    ];
    await ds.transaction((m) => store.insertEvents(m, events));
    const claimed = await store.claim({ limit: 10, leaseMs: 60_000, owner: 'a', topics: [topic] });
    expect(claimed.map((c) => c.eventId).sort()).toEqual(events.map((e) => e.eventId).sort());
    const first = claimed.find((c) => c.eventId === events[0]!.eventId)!;
    expect(first).toEqual({
      eventId: events[0]!.eventId,
      txId,
      topic,
      tag: 'created',
      keys: ['k1', "quote'd"],
      properties: { TX_ID: txId, 'x-y': 'ü\u0000z' },
      body: Buffer.from([0, 1, 2, 255, 39, 92]),
      aggregateId: events[0]!.aggregateId,
      attempts: 0,
    });
    const second = claimed.find((c) => c.eventId === events[1]!.eventId)!;
    expect(second.tag).toBeUndefined();
    expect(second.aggregateId).toBeUndefined();
  });

  it('a duplicate eventId or aggregate version is an InvalidMessageError naming the key', async () => {
    const topic = unique('t');
    const { events } = await insert('NEW', topic, 1);
    const again = { ...events[0]!, txId: uuidv7() };
    const err = await ds.transaction((m) => store.insertEvents(m, [again])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidMessageError);
    expect((err as Error).message).toContain(events[0]!.eventId);
  });

  it('two claimers never get the same row: a claim skips the rows another claim holds', async () => {
    const topic = unique('t');
    const { events } = await insert('NEW', topic, 6);
    let heldIds: string[] = [];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let second: Awaited<ReturnType<OutboxStore['claim']>> = [];
    // Claimer A holds its claim transaction open (its rows locked) while claimer B claims.
    const holder = ds.transaction('READ COMMITTED', async (m) => {
      const statements = outboxSqlFor(storesFor(ds).dialect);
      heldIds = (await execute<{ event_id: string }>(m, statements.selectDue([topic], 3))).rows.map(
        (r) => r.event_id,
      );
      second = await store.claim({ limit: 10, leaseMs: 60_000, owner: 'b', topics: [topic] });
      release();
    });
    await released;
    await holder;
    expect(heldIds).toHaveLength(3);
    expect(second).toHaveLength(3);
    const secondIds = second.map((c) => c.eventId);
    expect(secondIds.filter((id) => heldIds.includes(id))).toEqual([]);
    expect([...heldIds, ...secondIds].sort()).toEqual(events.map((e) => e.eventId).sort());
  });

  it('concurrent claims split the due rows, each row to exactly one claimer', async () => {
    const topic = unique('t');
    const { events } = await insert('NEW', topic, 20);
    const owners = ['c1', 'c2', 'c3', 'c4'];
    const got = await Promise.all(
      owners.map((owner) => store.claim({ limit: 20, leaseMs: 60_000, owner, topics: [topic] })),
    );
    const all = got.flat().map((c) => c.eventId);
    expect(new Set(all).size).toBe(all.length);
    expect(all.sort()).toEqual(events.map((e) => e.eventId).sort());
    // Leased: no claim takes them again while the lease holds.
    expect(await store.claim({ limit: 20, leaseMs: 60_000, owner: 'c5', topics: [topic] })).toEqual([]);
  });

  it('an expired lease is claimed again; the old owner can no longer reschedule the row', async () => {
    const topic = unique('t');
    const { events } = await insert('NEW', topic, 1);
    const id = events[0]!.eventId;
    expect((await store.claim({ limit: 1, leaseMs: 1, owner: 'old', topics: [topic] }))[0]?.eventId).toBe(id);
    let reclaimed: string | undefined;
    await waitFor(
      async () => {
        reclaimed = (await store.claim({ limit: 1, leaseMs: 60_000, owner: 'new', topics: [topic] }))[0]
          ?.eventId;
        return reclaimed !== undefined;
      },
      { description: 'the expired lease claimed again' },
    );
    expect(reclaimed).toBe(id);
    await store.markFailed(id, 'old', 'late failure of the old owner', 1000, true);
    expect(await outboxRow(ds, id)).toMatchObject({ status: 'NEW', attempts: 0, lease_owner: 'new' });
    await store.markFailed(id, 'new', 'x'.repeat(5000), 60_000, false);
    const failed = await outboxRow(ds, id);
    expect(failed).toMatchObject({ status: 'NEW', attempts: 1, lease_owner: null });
    expect(failed!.last_error).toHaveLength(2000);
    // Not due for a minute.
    expect(await store.claim({ limit: 1, leaseMs: 60_000, owner: 'x', topics: [topic] })).toEqual([]);
  });

  it('markSent, markFailed(dead) and replayDead with its count', async () => {
    const topic = unique('t');
    const { events } = await insert('NEW', topic, 3);
    const [a, b, c] = events.map((e) => e.eventId) as [string, string, string];
    await store.claim({ limit: 3, leaseMs: 60_000, owner: 'o', topics: [topic] });
    await store.markSent(a, 'o');
    await store.markFailed(b, 'o', 'gave up', 0, true);
    await store.markFailed(c, 'o', 'gave up', 0, true);
    expect(await outboxRow(ds, a)).toMatchObject({ status: 'SENT', lease_owner: null });
    expect(await outboxRow(ds, b)).toMatchObject({ status: 'DEAD', attempts: 1, last_error: 'gave up' });
    expect(await store.replayDead([b, a])).toBe(1);
    expect(await outboxRow(ds, b)).toMatchObject({ status: 'NEW', attempts: 0 });
    expect(await store.replayDead([])).toBe(0);
    expect(await outboxRow(ds, c)).toMatchObject({ status: 'DEAD' });
    const replayed = await store.claim({ limit: 3, leaseMs: 60_000, owner: 'p', topics: [topic] });
    expect(replayed.map((r) => r.eventId)).toEqual([b]);
  });

  it('markConfirmed turns IN_FLIGHT (and promoted NEW) rows SENT, nothing else', async () => {
    const topic = unique('t');
    const { events } = await insert('IN_FLIGHT', topic, 2);
    const [a, b] = events.map((e) => e.eventId) as [string, string];
    await store.markConfirmed([a]);
    expect(await outboxRow(ds, a)).toMatchObject({ status: 'SENT' });
    expect(await outboxRow(ds, b)).toMatchObject({ status: 'IN_FLIGHT' });
    await store.markConfirmed([]);
  });
});
