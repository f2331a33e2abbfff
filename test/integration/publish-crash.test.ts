import type { DataSource } from 'typeorm';
import { TransactionalProducer, uuidv7 } from '../../src';
import { Collector } from '../helpers/collector';
import {
  childInWindow,
  expectCheckBackRollbacks,
  type CrashMode,
  type SavepointWindow,
} from '../helpers/crashWindow';
import { ensureSchema, openDataSource, orderExists, sql, txRecord } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';

const TOPIC = 'rmqtx_tx_join_1';
const GROUP = 'it_publish_crash';
const RUNS = Number(process.env.CRASH_RUNS ?? 2);
/**
 * The survivor's discard recovery: in-doubt halves older than this are republished from IN_FLIGHT
 * outbox rows (above the test broker's check horizon, 1 s + 5 checks x 2 s; a check delayed past
 * it on a loaded machine makes a republish duplicate, which expectDelivered accounts for).
 */
const DISCARD_HORIZON_MS = 15_000;
const RECOVERY_INTERVAL_MS = 1000;
/** How long a rolled-back half may wait for its check-back tombstone (see expectCheckBackRollbacks). */
const TOMBSTONE_WAIT_MS = 40_000;

/**
 * The crash windows of publish(manager, events) inside the caller's own transaction: a producer
 * process killed with SIGKILL in each window; another instance of the group answers the
 * broker's check-backs from tx_record.
 */
describe('crash windows of publish() in the caller transaction: SIGKILL, resolved by another instance', () => {
  let ds: DataSource;
  let collector: Collector;
  let survivor: TransactionalProducer;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    collector = await new Collector(TOPIC).start();
    // As in crash.test.ts: the killed children's channels take checks for a while; an in-doubt
    // half message discarded after the test broker's 5 checks is republished by discard recovery.
    survivor = makeProducer(ds, {
      topics: [TOPIC],
      producerGroup: GROUP,
      discardRecovery: { horizonMs: DISCARD_HORIZON_MS, intervalMs: RECOVERY_INTERVAL_MS },
    });
    await survivor.start();
  });

  afterAll(async () => {
    await survivor?.shutdown();
    await collector?.stop();
    await ds?.destroy();
  });

  async function flush(): Promise<void> {
    const { txId } = await ds.transaction((m) => survivor.publish(m, { topic: TOPIC, body: 'marker' }));
    await waitFor(() => collector.withProperty('TX_ID', txId).length > 0, {
      timeoutMs: 30_000,
      description: 'marker delivered',
    });
  }

  async function killAll(mode: CrashMode): Promise<Array<{ orderId: string; txId: string }>> {
    return Promise.all(
      Array.from({ length: RUNS }, async () => {
        const orderId = `${mode}-${uuidv7()}`;
        const child = await childInWindow(mode, TOPIC, GROUP, orderId);
        await child.kill();
        return { orderId, txId: child.txId };
      }),
    );
  }

  async function expectNeverDelivered(runs: Array<{ orderId: string; txId: string }>): Promise<void> {
    // The killed caller's transaction held the fence row; the database rolled it back with the
    // connection.
    for (const { orderId } of runs) expect(await orderExists(ds, orderId)).toBe(false);
    await expectCheckBackRollbacks(
      ds,
      runs.map((r) => r.txId),
      TOMBSTONE_WAIT_MS,
    );
    await flush();
    for (const { txId } of runs) expect(collector.withProperty('TX_ID', txId)).toEqual([]);
  }

  it(`(1) killed after the half send, before the outbox rows: never delivered (${RUNS} runs)`, async () => {
    await expectNeverDelivered(await killAll('join-after-half'));
  });

  it(`(2) killed inside the caller's work after publish returned, before COMMIT: never delivered (${RUNS} runs)`, async () => {
    await expectNeverDelivered(await killAll('join-in-work'));
  });

  it(`(3) killed after the caller's COMMIT, before EndTransaction: delivered by check-back (${RUNS} runs)`, async () => {
    const runs = await killAll('join-after-commit');
    for (const { orderId, txId } of runs) {
      expect(await orderExists(ds, orderId)).toBe(true);
      expect(await txRecord(ds, txId)).toMatchObject({ status: 'COMMITTED', resolved_by: 'PRODUCER' });
      await waitFor(() => collector.withProperty('TX_ID', txId).length > 0, {
        timeoutMs: 40_000,
        description: `check-back delivered ${txId}`,
      });
    }
    await flush();
    // At least once, as in crash.test.ts: any copy is the same message with the same eventId.
    for (const { txId } of runs) {
      const copies = collector.withProperty('TX_ID', txId);
      expect(copies.length).toBeGreaterThanOrEqual(1);
      expect(new Set(copies.map((c) => `${c.messageId}/${c.properties.EVENT_ID}`)).size).toBe(1);
    }
  });

  interface SavepointRun extends SavepointWindow {
    orderId: string;
    txId: string;
    /** When the child stood in the window (its half messages were all sent before). */
    killedAt: number;
  }

  async function killAllSavepoint(
    mode: 'join-savepoint-rolled-back' | 'join-savepoint-released',
  ): Promise<SavepointRun[]> {
    return Promise.all(
      Array.from({ length: RUNS }, async () => {
        const orderId = `${mode}-${uuidv7()}`;
        const child = await childInWindow(mode, TOPIC, GROUP, orderId);
        const killedAt = Date.now();
        await child.kill();
        if (!child.savepoint) throw new Error(`the ${mode} child reported no savepoint`);
        return { orderId, txId: child.txId, killedAt, ...child.savepoint };
      }),
    );
  }

  const deliveredCopies = (eventId: string) => collector.withProperty('EVENT_ID', eventId);
  const republished = (): number => survivor.stats.discardRecovery?.republished ?? 0;
  /** The survivor's republish count when the current test began. */
  let republishedBefore = 0;
  beforeEach(() => {
    republishedBefore = republished();
  });

  async function outboxRowsOf(txId: string): Promise<string[]> {
    const rows: Array<{ event_id: string }> = await ds.query(
      sql('SELECT event_id FROM outbox_event WHERE tx_id = ?'),
      [txId],
    );
    return rows.map((r) => r.event_id);
  }

  /**
   * Each event delivered at least once, every copy the same message (at least once, as in (3)).
   * A second message for an event is a republish duplicate, allowed only when the survivor's
   * discard recovery republished that many events (a check delayed past the horizon).
   */
  async function expectDelivered(eventIds: readonly string[]): Promise<void> {
    for (const eventId of eventIds) {
      await waitFor(() => deliveredCopies(eventId).length > 0, {
        timeoutMs: 40_000,
        description: `check-back delivered event ${eventId}`,
      });
    }
    await flush();
    let extraMessages = 0;
    for (const eventId of eventIds) {
      const copies = deliveredCopies(eventId);
      expect(copies.length).toBeGreaterThanOrEqual(1);
      extraMessages += new Set(copies.map((c) => c.messageId)).size - 1;
    }
    expect(extraMessages).toBeLessThanOrEqual(republished() - republishedBefore);
  }

  it(`(4) a savepoint rolled back (its ROLLBACK lost), the outer transaction committed, killed after COMMIT before EndTransaction: the savepoint's events never delivered, the outer ones delivered (${RUNS} runs)`, async () => {
    const runs = await killAllSavepoint('join-savepoint-rolled-back');
    for (const run of runs) {
      expect(run.savepointTxId).not.toBe(run.txId);
      expect(run.outerEventIds).toHaveLength(2);
      expect(run.savepointEventIds).toHaveLength(2);
      expect(await orderExists(ds, run.orderId)).toBe(true);
      expect(await txRecord(ds, run.txId)).toMatchObject({ status: 'COMMITTED', resolved_by: 'PRODUCER' });
      // The savepoint's fence row and outbox rows went with the savepoint: nothing for discard
      // recovery to republish, and the check-back of its halves finds no row and tombstones it when it
      // reaches the survivor (the tombstone also shows its ROLLBACK never reached the broker).
      expect(await outboxRowsOf(run.savepointTxId)).toEqual([]);
    }
    await expectCheckBackRollbacks(
      ds,
      runs.map((r) => r.savepointTxId),
      TOMBSTONE_WAIT_MS,
    );
    await expectDelivered(runs.flatMap((r) => r.outerEventIds));
    // Never delivered: wait past the broker's check budget (1 s + 5 checks x 2 s on the test
    // broker) and the survivor's discard horizon, then for a marker sent after that.
    const horizon = Math.max(...runs.map((r) => r.killedAt)) + DISCARD_HORIZON_MS + 3 * RECOVERY_INTERVAL_MS;
    await waitFor(() => Date.now() >= horizon, {
      timeoutMs: DISCARD_HORIZON_MS + 10_000,
      description: 'the discard horizon of the savepoint halves passed',
    });
    await flush();
    for (const run of runs) {
      for (const eventId of run.savepointEventIds) expect(deliveredCopies(eventId)).toEqual([]);
      expect(collector.withProperty('TX_ID', run.savepointTxId)).toEqual([]);
    }
  });

  it(`(5) a savepoint released, killed after the outer COMMIT before EndTransaction: every event delivered, by check-back or, where the broker's checks went to the killed instance, by discard recovery (${RUNS} runs)`, async () => {
    const runs = await killAllSavepoint('join-savepoint-released');
    for (const run of runs) {
      expect(run.savepointTxId).not.toBe(run.txId);
      expect(run.outerEventIds).toHaveLength(1);
      // The savepoint's two events and the later outer call, which joins the released fence.
      expect(run.savepointEventIds).toHaveLength(3);
      expect(await orderExists(ds, run.orderId)).toBe(true);
      // The released savepoint's fence row committed with the outer transaction.
      expect(await txRecord(ds, run.txId)).toMatchObject({ status: 'COMMITTED', resolved_by: 'PRODUCER' });
      expect(await txRecord(ds, run.savepointTxId)).toMatchObject({
        status: 'COMMITTED',
        resolved_by: 'PRODUCER',
      });
    }
    await expectDelivered(runs.flatMap((r) => [...r.outerEventIds, ...r.savepointEventIds]));
  });
});
