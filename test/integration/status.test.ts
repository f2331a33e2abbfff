import type { DataSource } from 'typeorm';
import {
  collectStatus,
  TransactionalProducer,
  TransactionFencedError,
  TransactionResolution,
  TxRecordResolver,
  TypeOrmTxRecordStore,
  uuidv7,
  type CheckBackOutcome,
  type StatusReport,
} from '../../src';
import { TEST_DATABASE, ago, ensureSchema, openDataSource, qid, qs, sql } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';

// Only this file uses rmqtx_tx_15, so deltas on it are this file's own doing.
const TOPIC = 'rmqtx_tx_15';
const GROUP = 'it_status';

describe(`collectStatus against real rows (${TEST_DATABASE})`, () => {
  let ds: DataSource;
  const txIds: string[] = [];
  const groups: string[] = [];

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
  });

  afterAll(async () => {
    // Only this file's rows.
    if (txIds.length > 0) {
      const list = qs(txIds.length);
      await ds.query(sql(`DELETE FROM outbox_event WHERE tx_id IN (${list})`), txIds);
      await ds.query(sql(`DELETE FROM tx_record WHERE tx_id IN (${list})`), txIds);
    }
    for (const g of groups) await ds.query(sql('DELETE FROM consumed_event WHERE consumer_group = ?'), [g]);
    await ds?.destroy();
  });

  it('counts and ages exactly the rows of a topic and consumer group written for this run', async () => {
    const run = uuidv7().slice(-12);
    const topic = `rmqtx_status_${run}`;
    const group = `it_status_${run}`;
    groups.push(group);
    const tx = async (status: string, resolvedBy: string, agoMs: number) => {
      const txId = uuidv7();
      txIds.push(txId);
      await ds.query(
        sql(`INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count, created_at)
         VALUES (?, ?, ?, ?, ?, 1, ${ago('?', 'MICROSECOND')})`),
        [txId, status, resolvedBy, GROUP, topic, agoMs * 1000],
      );
      return txId;
    };
    const event = async (txId: string, status: string) => {
      await ds.query(
        sql(`INSERT INTO outbox_event (event_id, tx_id, topic, ${qid('keys')}, properties, payload, occurred_at, status, attempts, next_attempt_at)
         VALUES (?, ?, ?, '[]', '{}', ?, CURRENT_TIMESTAMP(3), ?, 0, CURRENT_TIMESTAMP(3))`),
        [uuidv7(), txId, topic, Buffer.from('x'), status],
      );
    };
    const newTx = await tx('COMMITTED', 'PRODUCER', 5000);
    const inFlightTx = await tx('COMMITTED', 'PRODUCER', 2000);
    const sentTx = await tx('COMMITTED', 'PRODUCER', 0);
    await tx('ROLLED_BACK', 'CHECK_BACK', 0);
    await event(newTx, 'NEW');
    await event(inFlightTx, 'IN_FLIGHT');
    await event(inFlightTx, 'IN_FLIGHT');
    await event(sentTx, 'SENT');
    await event(sentTx, 'SENT');
    await event(sentTx, 'DEAD');
    for (const [outcome, n] of [
      ['APPLIED', 2],
      ['STALE', 1],
    ] as const) {
      for (let i = 0; i < n; i++) {
        await ds.query(
          sql(`INSERT INTO consumed_event (consumer_group, event_id, event_type, aggregate_type, aggregate_id, aggregate_version, outcome)
           VALUES (?, ?, 'T', 'A', 'a1', ?, ?)`),
          [group, uuidv7(), i + 1, outcome],
        );
      }
    }

    const s = await collectStatus(ds, { topics: [topic], consumerGroups: [group] });

    expect(s.txRecords).toEqual({
      total: 4,
      byStatus: { COMMITTED: 3, ROLLED_BACK: 1 },
      byResolvedBy: { PRODUCER: 3, CHECK_BACK: 1 },
      byStatusAndResolvedBy: {
        COMMITTED: { PRODUCER: 3, CHECK_BACK: 0 },
        ROLLED_BACK: { PRODUCER: 0, CHECK_BACK: 1 },
      },
    });
    expect(s.outbox).toMatchObject({
      total: 6,
      byStatus: { NEW: 1, IN_FLIGHT: 2, SENT: 2, DEAD: 1, CDC: 0 },
      undelivered: 3,
      dead: 1,
    });
    expect(Object.keys(s.outbox.byTopic)).toEqual([topic]);
    // Ages are from the database clock: at least the backdated amount.
    expect(s.outbox.oldestUndeliveredAgeMs).toBeGreaterThanOrEqual(5000);
    expect(s.outbox.byTopic[topic]!.oldestUndeliveredAgeMs).toBe(s.outbox.oldestUndeliveredAgeMs);
    expect(s.inDoubt.transactions).toBe(1);
    expect(s.inDoubt.events).toBe(2);
    expect(s.inDoubt.oldestAgeMs).toBeGreaterThanOrEqual(2000);
    expect(s.inDoubt.oldestAgeMs!).toBeLessThan(s.outbox.oldestUndeliveredAgeMs!);
    expect(s.consumedEvents).toEqual({
      total: 3,
      byConsumerGroup: { [group]: { total: 3, APPLIED: 2, STALE: 1, IGNORED: 0 } },
    });
    expect(new Date(s.generatedAt).getTime()).not.toBeNaN();

    const other = await collectStatus(ds, { topics: [`${topic}_none`], consumerGroups: [`${group}_none`] });
    expect(other.outbox.total).toBe(0);
    expect(other.txRecords.total).toBe(0);
    expect(other.inDoubt).toMatchObject({ transactions: 0, events: 0, oldestAgeMs: null });
    expect(other.consumedEvents.total).toBe(0);
  });

  it('follows real producer traffic: outbox NEW, an in-doubt transaction the check-back resolves, a fence', async () => {
    let gateOpen = false;
    const answers: CheckBackOutcome[] = [];
    const builtIn = new TxRecordResolver(new TypeOrmTxRecordStore(ds), {
      producerGroup: GROUP,
      lockWaitTimeoutMs: 1000,
    });
    let dropEnd = false;
    let fenceNext = false;
    const producer: TransactionalProducer = makeProducer(
      ds,
      {
        topics: [TOPIC],
        producerGroup: GROUP,
        checkBack: {
          // The check-back waits behind a gate, so the in-doubt state is observed deterministically.
          resolverScope: 'all',
          resolver: {
            resolve: async (m) => {
              await waitFor(() => gateOpen, { timeoutMs: 60_000, description: 'check-back gate' });
              return builtIn.resolve(m);
            },
          },
          onResolved: (o) => answers.push(o),
        },
      },
      {
        beforeEnd: async () => {
          // An EndTransaction that fails: the producer leaves the outcome to the check-back.
          if (dropEnd) throw new Error('EndTransaction lost (test)');
          return true;
        },
        afterHalf: async (half) => {
          if (!fenceNext) return;
          await waitFor(
            () => answers.some((a) => a.messageId === half.messageId && a.resolution === 'ROLLBACK'),
            { timeoutMs: 60_000, description: 'the check-back to fence the transaction' },
          );
        },
      },
    );
    await producer.start();
    const status = () => collectStatus(ds, { topics: [TOPIC] });
    try {
      const base: StatusReport = await status();

      const viaOutbox = await producer.transact({ topic: TOPIC, body: { n: 1 } }, async () => 'ok', {
        delivery: 'outbox',
      });
      txIds.push(viaOutbox.txId);
      const afterOutbox = await status();
      expect(afterOutbox.outbox.byStatus.NEW - base.outbox.byStatus.NEW).toBe(1);
      expect(afterOutbox.txRecords.byStatusAndResolvedBy.COMMITTED.PRODUCER).toBe(
        base.txRecords.byStatusAndResolvedBy.COMMITTED.PRODUCER + 1,
      );
      expect(afterOutbox.outbox.oldestUndeliveredAgeMs).not.toBeNull();
      expect(afterOutbox.inDoubt.transactions).toBe(base.inDoubt.transactions);

      // EndTransaction lost: the database committed, the broker does not know yet.
      dropEnd = true;
      const doubted = await producer.transact(
        [
          { topic: TOPIC, body: { n: 2 } },
          { topic: TOPIC, body: { n: 3 } },
        ],
        async () => 'ok',
      );
      dropEnd = false;
      txIds.push(doubted.txId);
      const inDoubt = await status();
      expect(inDoubt.inDoubt.transactions - base.inDoubt.transactions).toBe(1);
      expect(inDoubt.inDoubt.events - base.inDoubt.events).toBe(2);
      expect(inDoubt.outbox.byStatus.IN_FLIGHT - base.outbox.byStatus.IN_FLIGHT).toBe(2);
      expect(inDoubt.inDoubt.oldestAgeMs).not.toBeNull();

      gateOpen = true;
      await waitFor(
        async () => {
          const s = await status();
          return (
            s.inDoubt.transactions === base.inDoubt.transactions &&
            s.outbox.byStatus.SENT === base.outbox.byStatus.SENT + 2
          );
        },
        {
          timeoutMs: 60_000,
          description: 'the check-back COMMIT to confirm both events (IN_FLIGHT -> SENT)',
        },
      );
      expect(
        answers.filter((a) => a.txId === doubted.txId && a.resolution === TransactionResolution.COMMIT)
          .length,
      ).toBeGreaterThanOrEqual(1);

      // A transaction too slow to insert its row is fenced: ROLLED_BACK by CHECK_BACK.
      fenceNext = true;
      const err = await producer
        .transact({ topic: TOPIC, body: { n: 4 } }, async () => 'never')
        .catch((e: unknown) => e);
      fenceNext = false;
      expect(err).toBeInstanceOf(TransactionFencedError);
      txIds.push((err as TransactionFencedError).txId);
      const fenced = await status();
      expect(fenced.txRecords.byStatusAndResolvedBy.ROLLED_BACK.CHECK_BACK).toBe(
        base.txRecords.byStatusAndResolvedBy.ROLLED_BACK.CHECK_BACK + 1,
      );
      expect(fenced.outbox.total - base.outbox.total).toBe(3);
    } finally {
      gateOpen = true;
      await producer.shutdown();
    }
  });
});
