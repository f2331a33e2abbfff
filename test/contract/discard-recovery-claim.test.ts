import type { DataSource } from 'typeorm';
import { uuidv7 } from '../../src';
import { storesFor } from '../../src/store';
import type { OutboxStore } from '../../src/store/ports';
import { ensureSchema, openDataSource } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { TEST_DATABASE, cleanUp, ageRow, insertTxRecord, newEvent, outboxRow, unique } from './support';

const HORIZON_MS = 60_000;

/**
 * Discard recovery and the relay's promotion: committed IN_FLIGHT events older than the horizon,
 * on the database under test (the rows are aged by moving next_attempt_at back, never by sleeping).
 */
describe(`discard-recovery claim (${TEST_DATABASE})`, () => {
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

  async function inFlight(
    topic: string,
    group: string,
    status: 'COMMITTED' | 'ROLLED_BACK' = 'COMMITTED',
    ageMs = 2 * HORIZON_MS,
  ): Promise<string> {
    const txId = uuidv7();
    const event = newEvent(txId, topic, 'IN_FLIGHT');
    await insertTxRecord(ds, txId, status, group);
    await ds.transaction((m) => store.insertEvents(m, [event]));
    await ageRow(ds, event.eventId, ageMs);
    return event.eventId;
  }

  const claim = (topic: string, group: string, owner: string, leaseMs = 60_000) =>
    store.claimUnconfirmed({
      producerGroup: group,
      horizonMs: HORIZON_MS,
      limit: 10,
      leaseMs,
      owner,
      topics: [topic],
    });

  it("takes only its group's committed events past the horizon, and leases them", async () => {
    const topic = unique('t');
    const group = unique('g');
    const due = await inFlight(topic, group);
    await inFlight(topic, group, 'ROLLED_BACK');
    await inFlight(topic, group, 'COMMITTED', HORIZON_MS / 2);
    const otherGroup = await inFlight(topic, unique('other'));
    const claimed = await claim(topic, group, 'r1');
    expect(claimed.map((c) => c.eventId)).toEqual([due]);
    expect(await outboxRow(ds, due)).toMatchObject({ status: 'IN_FLIGHT', lease_owner: 'r1' });
    // Leased: neither another instance nor the relay's promotion (of every group) takes it.
    expect(await claim(topic, group, 'r2')).toEqual([]);
    expect(await store.promoteUnconfirmed(HORIZON_MS, 10, [topic])).toBe(1);
    expect(await outboxRow(ds, otherGroup)).toMatchObject({ status: 'NEW' });
    expect(await outboxRow(ds, due)).toMatchObject({ status: 'IN_FLIGHT', lease_owner: 'r1' });
  });

  it('concurrent recoveries never take the same event', async () => {
    const topic = unique('t');
    const group = unique('g');
    const ids = [];
    for (let i = 0; i < 8; i++) ids.push(await inFlight(topic, group));
    const got = await Promise.all(['a', 'b', 'c'].map((owner) => claim(topic, group, owner)));
    const all = got.flat().map((c) => c.eventId);
    expect(new Set(all).size).toBe(all.length);
    expect(all.sort()).toEqual(ids.sort());
  });

  it('a failed republish releases the lease (owner-fenced) and counts the attempt; success marks SENT', async () => {
    const topic = unique('t');
    const group = unique('g');
    const id = await inFlight(topic, group);
    await claim(topic, group, 'r1', 1);
    let reclaimed: string | undefined;
    await waitFor(
      async () => {
        reclaimed = (await claim(topic, group, 'r2'))[0]?.eventId;
        return reclaimed !== undefined;
      },
      { description: 'the expired recovery lease claimed again' },
    );
    expect(reclaimed).toBe(id);
    await store.releaseUnconfirmed(id, 'r1', 'stale owner', 0);
    expect(await outboxRow(ds, id)).toMatchObject({ lease_owner: 'r2', attempts: 0 });
    await store.releaseUnconfirmed(id, 'r2', 'broker down', 0);
    expect(await outboxRow(ds, id)).toMatchObject({
      status: 'IN_FLIGHT',
      lease_owner: null,
      attempts: 1,
      last_error: 'broker down',
    });
    expect((await claim(topic, group, 'r3')).map((c) => c.eventId)).toEqual([id]);
    await store.markSent(id, 'r3');
    expect(await outboxRow(ds, id)).toMatchObject({ status: 'SENT', lease_owner: null });
  });

  it("the relay's promotion turns overdue committed IN_FLIGHT events NEW for its claim", async () => {
    const topic = unique('t');
    const group = unique('g');
    const due = await inFlight(topic, group);
    await inFlight(topic, group, 'ROLLED_BACK');
    await inFlight(topic, group, 'COMMITTED', HORIZON_MS / 2);
    expect(await store.promoteUnconfirmed(HORIZON_MS, 10, [topic])).toBe(1);
    expect(await outboxRow(ds, due)).toMatchObject({ status: 'NEW' });
    const claimed = await store.claim({ limit: 10, leaseMs: 60_000, owner: 'relay', topics: [topic] });
    expect(claimed.map((c) => c.eventId)).toEqual([due]);
  });
});
