import type { DataSource } from 'typeorm';
import { collectStatus } from '../../src';
import { TEST_DATABASE, ensureSchema, openDataSource } from '../helpers/db';
import { MIN_MS, insertConsumed, insertOutbox, insertTx, runTag, cleanUpOps } from './opsSupport';

/** collectStatus on the database ROCKETMQ_TX_DB_URL names: counts and ages (database clock). */
describe(`collectStatus (${TEST_DATABASE})`, () => {
  let ds: DataSource;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
  });
  afterAll(async () => {
    if (ds) await cleanUpOps(ds);
    await ds?.destroy();
  });

  it('counts per status, resolver, topic and group; ages of the oldest undelivered and in-doubt events', async () => {
    const tag = runTag();
    const topic = `ct_st_${tag}`;
    const other = `ct_st2_${tag}`;
    const group = `ct_st_${tag}`;
    // An in-doubt transaction committed 31 min ago (past the 20 min discard horizon: overdue).
    const overdueTx = await insertTx(ds, { topic, ageMs: 31 * MIN_MS });
    await insertOutbox(ds, { txId: overdueTx, topic, status: 'IN_FLIGHT', ageMs: 31 * MIN_MS });
    await insertOutbox(ds, { txId: overdueTx, topic, status: 'IN_FLIGHT', ageMs: 31 * MIN_MS });
    // One committed 2 min ago: awaiting the broker. One taken by a discard recovery: republishing.
    const youngTx = await insertTx(ds, { topic, ageMs: 2 * MIN_MS });
    await insertOutbox(ds, { txId: youngTx, topic, status: 'IN_FLIGHT', ageMs: 2 * MIN_MS });
    const retriedTx = await insertTx(ds, { topic, ageMs: 40 * MIN_MS });
    await insertOutbox(ds, { txId: retriedTx, topic, status: 'IN_FLIGHT', ageMs: 40 * MIN_MS, attempts: 2 });
    // Outbox rows without a tx_record: ages from occurred_at.
    await insertOutbox(ds, { topic, status: 'NEW', ageMs: 5 * MIN_MS });
    await insertOutbox(ds, { topic, status: 'SENT', ageMs: 0 });
    await insertOutbox(ds, { topic, status: 'DEAD', ageMs: 0 });
    await insertOutbox(ds, { topic: other, status: 'NEW', ageMs: 90 * MIN_MS });
    await insertTx(ds, { topic, ageMs: 0, status: 'ROLLED_BACK', resolvedBy: 'CHECK_BACK' });
    await insertConsumed(ds, { group, ageMs: 0 });
    await insertConsumed(ds, { group, ageMs: 0, outcome: 'STALE' });

    const s = await collectStatus(ds, { topics: [topic, other], consumerGroups: [group] });
    expect(s.txRecords).toMatchObject({
      total: 4,
      byStatus: { COMMITTED: 3, ROLLED_BACK: 1 },
      byStatusAndResolvedBy: { ROLLED_BACK: { CHECK_BACK: 1, PRODUCER: 0 } },
    });
    expect(s.outbox.byStatus).toEqual({ NEW: 2, IN_FLIGHT: 4, SENT: 1, DEAD: 1, CDC: 0 });
    expect(s.outbox.total).toBe(8);
    expect(s.outbox.dead).toBe(1);
    expect(s.outbox.byTopic[topic]!.byStatus).toEqual({ NEW: 1, IN_FLIGHT: 4, SENT: 1, DEAD: 1, CDC: 0 });
    expect(s.outbox.byTopic[other]!.undelivered).toBe(1);
    // Ages on the database clock: 90 min (other topic's NEW row), 40 min (this topic's oldest).
    const within = (v: number | null, lowMin: number, highMin: number) => {
      expect(v).not.toBeNull();
      expect(v!).toBeGreaterThanOrEqual(lowMin * MIN_MS);
      expect(v!).toBeLessThan(highMin * MIN_MS);
    };
    within(s.outbox.oldestUndeliveredAgeMs, 89, 120);
    within(s.outbox.byTopic[topic]!.oldestUndeliveredAgeMs, 39, 70);
    expect(s.inDoubt).toMatchObject({ transactions: 3, events: 4 });
    within(s.inDoubt.oldestAgeMs, 39, 70);
    expect(s.inDoubt.byState.overdue).toMatchObject({ events: 2, transactions: 1 });
    within(s.inDoubt.byState.overdue.oldestAgeMs, 30, 60);
    expect(s.inDoubt.byState.awaitingBroker).toMatchObject({ events: 1, transactions: 1 });
    within(s.inDoubt.byState.awaitingBroker.oldestAgeMs, 1, 19);
    expect(s.inDoubt.byState.republishing).toMatchObject({ events: 1, transactions: 1 });
    expect(s.consumedEvents.byConsumerGroup[group]).toEqual({ total: 2, APPLIED: 1, STALE: 1, IGNORED: 0 });

    // A longer discard horizon: the 31-min transaction is awaiting the broker, not overdue.
    const later = await collectStatus(ds, { topics: [topic], discardHorizonMs: 60 * MIN_MS });
    expect(later.inDoubt.byState.overdue.events).toBe(0);
    expect(later.inDoubt.byState.awaitingBroker.events).toBe(3);
  });
});
